"""Chat hosts whose clocks are wrong: the real hot-path client in a process under faketime.

``faketime`` (Debian package ``faketime``, installed by ``.ci/run``) shifts every clock call of
the process it runs, so the client really believes it is a day ahead or behind. The process
prints its own ``time.time()`` first, so a test can check the skew took effect.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from typing import Any, Final

import pytest

from worker.settings import Settings

#: How long a skewed enqueue process may take (interpreter start plus a few round trips).
PROCESS_TIMEOUT_SECONDS: Final = 60

_SCRIPT: Final = """
import json, sys, time
from worker.queue.client import MemoryClient
url, prefix, shards, deadline = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
print(time.time(), flush=True)
with MemoryClient.from_url(
    url, key_prefix=prefix, queue_shards=shards, socket_timeout_seconds=deadline
) as client:
    for item in json.load(sys.stdin):
        print(client.enqueue(**item), flush=True)
"""


def faketime() -> str:
    """Path of the ``faketime`` binary; the test is skipped, saying why, when it is missing."""
    found = shutil.which("faketime")
    if found is None:
        pytest.skip("faketime is not installed (Debian package `faketime`; .ci/run installs it)")
    return found


def skewed_enqueue(
    offset: str, settings: Settings, items: list[dict[str, Any]]
) -> tuple[float, list[str]]:
    """Enqueue ``items`` from a process whose clock is shifted by ``offset`` (``+1d``, ``-1d``)
    with the real client, knowing only the URL, key prefix, shard count and hot-path deadline
    of ``settings``; returns the time that process believed it was, and the candidate ids."""
    args = [settings.redis_url or "", settings.key_prefix, str(settings.queue_shards)]
    args.append(str(settings.socket_timeout_seconds))
    done = subprocess.run(
        [faketime(), "-f", offset, sys.executable, "-c", _SCRIPT, *args],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_SECONDS,
        check=True,
    )
    first, *ids = done.stdout.split()
    return float(first), ids
