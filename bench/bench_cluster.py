"""The queue on a three-master Redis Cluster against one Redis node, in the same run.

Both are private servers started here from the same ``redis-server`` binary, on loopback
TCP, without persistence: a three-master cluster (``--cluster-enabled yes`` and
``redis-cli --cluster create``) and a plain node. Measured on each, rounds interleaved:

- ``MemoryClient.enqueue`` (one candidate per call, over 100 users): rate and p50;
- ``MemoryClient.enqueue_many`` in batches of 50 (one pipeline per node on the cluster);
- one idle sweep (``claim_due`` over every shard, nothing due) at the default 256 shards:
  the fixed cost a sweep pays for the shard count.

On one machine a cluster cannot be faster (three servers share the same cores); what it buys
is room past one node's memory and CPU. The figures show what routing costs a client.
Run: ``python -m bench cluster``.
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Final

from bench._support import timed
from tests.support.redis_cluster import free_cluster_ports, redis_cluster
from worker import MemoryClient
from worker.models import EnqueueFields
from worker.queue.redis import open_redis
from worker.queue.redis_queue import RedisQueue
from worker.runtime.processes import find_redis_server
from worker.settings import Settings

OPS: Final = 2000
ROUNDS: Final = 3
BATCH: Final = 50
USERS: Final = 100
SWEEPS: Final = 50
TEXT: Final = "I prefer my coffee black, and please answer in French from now on."


@contextmanager
def single_node(folder: Path) -> Iterator[str]:
    """A plain ``redis-server`` on a free loopback port; yields its URL."""
    (port,) = free_cluster_ports(1)
    proc = subprocess.Popen(
        [find_redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    client = open_redis(url, timeout=1.0)
    try:
        for _ in range(200):
            try:
                client.ping()
                break
            except Exception:
                time.sleep(0.05)
        yield url
    finally:
        client.close()
        proc.kill()
        proc.wait()


class Contender:
    """One deployment under test: its client, its queue and what was measured."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self.settings = Settings(
            redis_url=url, key_prefix="mwbcluster", max_pending_per_namespace=1_000_000
        )
        self.client = MemoryClient(self.settings)
        self.redis = open_redis(url, timeout=5.0)
        self.queue = RedisQueue(self.redis, self.settings.for_queue)
        self.one: list[float] = []
        self.many: list[float] = []
        self.sweep: list[float] = []
        self.batch: list[EnqueueFields] = [
            {"user_id": f"u{i % USERS}", "trace_id": f"t{i}", "text": TEXT} for i in range(BATCH)
        ]

    def enqueue(self, i: int) -> None:
        self.client.enqueue(user_id=f"u{i % USERS}", trace_id=f"t{i}", text=TEXT)

    def enqueue_many(self, _i: int) -> None:
        self.client.enqueue_many(self.batch)

    def idle_sweep(self, _i: int) -> None:
        self.queue.claim_due(now=0)  # the clock hook at 1970: nothing is due, every shard runs

    def round(self) -> None:
        self.one += timed(self.enqueue, OPS)
        self.many += timed(self.enqueue_many, OPS // BATCH)
        self.sweep += timed(self.idle_sweep, SWEEPS)

    def close(self) -> None:
        self.client.close()
        self.redis.close()

    def figures(self) -> tuple[float, float, float, float]:
        """(enqueue ops/s, enqueue p50 µs, enqueue_many candidates/s, idle sweep p50 ms)."""
        return (
            len(self.one) / sum(self.one),
            statistics.median(self.one) * 1e6,
            BATCH * len(self.many) / sum(self.many),
            statistics.median(self.sweep) * 1e3,
        )


def run() -> list[str]:
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        (folder / "single").mkdir()
        single = Contender("single node", stack.enter_context(single_node(folder / "single")))
        cluster = Contender("3-master cluster", stack.enter_context(redis_cluster(folder / "c")))
        contenders = (single, cluster)
        try:
            for c in contenders:  # connections, script caches, slot map
                timed(c.enqueue, 100)
                c.queue.admin.publish_policy()
            for _ in range(ROUNDS):
                for c in contenders:
                    c.round()
        finally:
            for c in contenders:
                c.close()
    s, k = single.figures(), cluster.figures()
    lines = [
        f"{USERS} users, {len(TEXT)}-char texts, {ROUNDS} interleaved rounds, "
        f"{single.settings.queue_shards} shards",
        f"{'':<18} {'enqueue':>12} {'p50':>8} {'enqueue_many':>16} {'idle sweep':>11}",
    ]
    for c, f in ((single, s), (cluster, k)):
        lines.append(
            f"{c.name:<18} {f[0]:>8,.0f} op/s {f[1]:>5.0f} µs {f[2]:>10,.0f} cand/s {f[3]:>8.1f} ms"
        )
    lines.append(
        f"cluster / single: enqueue {k[0] / s[0]:.2f}x, enqueue_many {k[2] / s[2]:.2f}x, "
        f"idle sweep time {k[3] / s[3]:.2f}x"
    )
    return lines


if __name__ == "__main__":
    print(*run(), sep="\n")
