"""A chat host for the chaos experiments: the real hot-path client, driven over a pipe.

Run as ``python -m tests.chaos_support.enqueuer URL KEY_PREFIX QUEUE_SHARDS``, usually under
``faketime`` so the host's clock is a day off. It knows only what a chat service knows (the
URL, the key prefix and the shard count). It first prints its own ``time.time()`` (so the
driver can check the skew took effect), then answers each JSON line of enqueue fields on stdin
with one JSON line: ``{"id": ...}``, or ``{"error": class name, "message": ...}`` for a
:class:`~worker.errors.MemworkerError` (Redis restarting, say). End of input stops it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence

from worker.errors import MemworkerError
from worker.queue.client import MemoryClient


def main(argv: Sequence[str]) -> int:
    url, prefix, shards = argv[0], argv[1], int(argv[2])
    print(json.dumps({"time": time.time()}), flush=True)
    with MemoryClient.from_url(url, key_prefix=prefix, queue_shards=shards) as client:
        for line in sys.stdin:
            try:
                reply = {"id": client.enqueue(**json.loads(line))}
            except MemworkerError as exc:
                reply = {"error": type(exc).__name__, "message": str(exc)}
            print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
