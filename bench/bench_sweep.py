"""Sweep and ``status`` latency at 1k vs many waiting namespaces, and Redis bytes per namespace.

A sweep (:func:`worker.service.sweep.sweep`, gauges refreshed on every sweep: the worst case)
claims what is due and reads the queue statistics; ``status`` reads the same statistics. Both
must cost the same whether a thousand or a million namespaces are waiting out their debounce:
the statistics come from counters the scripts keep, one small script per shard. Goal: the
median of each with N waiting ≤ 1.5× its median with 1k, measured in the same run.

Setup: a private ``redis-server`` (free port, ``--save "" --appendonly no``) started by the
bench and stopped at the end. Namespaces are created through the real enqueue script
(pipelined EVALSHA, one candidate each), all at one injected clock reading, so every one is
waiting. Before each timed sweep, 50 more namespaces are enqueued already due (untimed), so
each sweep claims 50 among the waiting ones. First 1k namespaces are measured, then the queue
is filled up to N and measured again.

Memory: ``INFO used_memory`` growth from 1k to N, per namespace added (every key and every
set member a waiting namespace costs), and ``MEMORY USAGE`` of a sample's own keys (log and
meta). For reference the old full recount (:func:`worker.queue.scripts.recount_stats`,
O(namespaces)) is timed at 1k, and at N when N ≤ :data:`RECOUNT_UP_TO`.

``python -m bench sweep`` (N = 1,000,000, the default shard count); ``python -m bench sweep
--namespaces 100000 --shards 16`` for a quicker run or another shard count.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import redis

from bench._support import verdict
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.queue.scripts import SCRIPTS, Call, recount_stats, run_pipeline
from worker.runtime.processes import find_redis_server
from worker.service.sweep import sweep
from worker.settings import Settings
from worker.types import QueuePolicy

SMALL: Final = 1_000
DEFAULT_NAMESPACES: Final = 1_000_000
#: The deployment default, so the default run measures what a fresh deployment gets.
DEFAULT_SHARDS: Final = int(Settings.model_fields["queue_shards"].default)
#: Timed repetitions per measurement (medians are reported).
REPEATS: Final = 20
#: Namespaces made due before each timed sweep, which it claims.
DUE_PER_SWEEP: Final = 50
#: Enqueue calls per pipelined round trip while populating.
PIPELINE_CALLS: Final = 5000
#: Namespaces whose keys MEMORY USAGE samples.
SAMPLE: Final = 200
#: Namespaces enqueued due, claimed and acked at the end, to see what an acked one leaves.
ACKED: Final = 10_000
#: The old O(namespaces) recount is timed at N only up to this many (it takes ~40 µs each).
RECOUNT_UP_TO: Final = 200_000
GOAL: Final = 1.5
#: The injected clock (epoch s): every namespace is enqueued at T0 and measured at T0 + 1,
#: inside the 30 s debounce; the due ones are enqueued a minute earlier.
T0: Final = 1_800_000_000.0
STARTUP_SECONDS: Final = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _private_redis(*config: str) -> Iterator[redis.Redis]:
    """A throw-away redis-server without persistence, shut down (and its folder removed) after;
    ``config``: more ``--name value`` arguments."""
    folder = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    port = _free_port()
    command = [
        shutil.which("redis-server") or find_redis_server(),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(folder),
        "--logfile", str(folder / "redis.log"),
        *config,
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_timeout=120)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the bench's redis-server did not start") from None
                time.sleep(0.01)  # polling a starting process
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


class Filler:
    """Creates namespaces ``user:w<i>`` through the real enqueue script, pipelined."""

    def __init__(self, queue: RedisQueue) -> None:
        self.queue = queue
        template = make_candidate(user_id="TEMPLATE", trace_id="bench", text="I prefer tea")
        self.payload = template.model_dump_json()
        self.created = 0

    def enqueue(self, names: list[str], at: float) -> None:
        layout = self.queue.layout
        calls: list[Call] = []
        defaults = QueuePolicy.defaults(layout.shards).packed()
        for name in names:
            call = SCRIPTS["enqueue"].bind(
                layout,
                now=int(at * 1000),
                namespace=f"user:{name}",
                id=f"c-{name}",
                candidate=self.payload.replace("TEMPLATE", name),
                shards=layout.shards,
                policy=defaults,
            )
            calls.append(call)
        for start in range(0, len(calls), PIPELINE_CALLS):
            for reply in run_pipeline(self.queue.redis, calls[start : start + PIPELINE_CALLS]):
                if isinstance(reply, Exception):
                    raise reply

    def fill_to(self, total: int) -> float:
        """Waiting namespaces up to ``total``; seconds taken."""
        started = time.perf_counter()
        while self.created < total:
            n = min(PIPELINE_CALLS * 4, total - self.created)
            self.enqueue([f"w{i}" for i in range(self.created, self.created + n)], T0)
            self.created += n
        return time.perf_counter() - started


def _median_ms(op: Callable[[], object], before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(REPEATS):
        if before is not None:
            before()
        started = time.perf_counter()
        op()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


class Measure:
    def __init__(self, queue: RedisQueue, filler: Filler) -> None:
        self.queue, self.filler = queue, filler
        self.round = 0
        self.claimed = 0

    def _make_due(self) -> None:
        self.round += 1
        names = [f"d{self.round}-{i}" for i in range(DUE_PER_SWEEP)]
        self.filler.enqueue(names, T0 - 60)

    def _sweep(self) -> None:
        self.claimed += len(sweep(self.queue, lambda claim: None, now=T0 + 1))

    def sweep_ms(self) -> float:
        return _median_ms(self._sweep, self._make_due)

    def status_ms(self) -> float:
        return _median_ms(lambda: self.queue.admin.stats(now=T0 + 1))

    def recount_ms(self) -> float:
        layout = self.queue.layout
        started = time.perf_counter()
        recount_stats(self.queue.redis, layout, int((T0 + 1) * 1000))
        return (time.perf_counter() - started) * 1000


def _sample_bytes(client: redis.Redis, queue: RedisQueue) -> float:
    total = 0
    for i in range(SAMPLE):
        ns = f"user:w{i}"
        for key in (queue.layout.log(ns), queue.layout.meta(ns)):
            total += int(client.memory_usage(key, samples=0) or 0)
    return total / SAMPLE


def _acked_leftover(client: redis.Redis, queue: RedisQueue, filler: Filler) -> tuple[float, int]:
    """Bytes per namespace and keys left after :data:`ACKED` namespaces had one batch each
    enqueued, claimed and acked."""
    used = int(client.info("memory")["used_memory"])
    names = [f"a{i}" for i in range(ACKED)]
    filler.enqueue(names, T0 - 60)
    while claims := queue.claim_due(now=T0 + 1):
        for claim in claims:
            queue.ack(claim, now=T0 + 1)
    left = int(client.info("memory")["used_memory"]) - used
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.exists(queue.layout.meta(f"user:{name}"), queue.layout.log(f"user:{name}"))
    return left / ACKED, sum(int(n) for n in pipe.execute())


def measure(namespaces: int, shards: int, config: tuple[str, ...] = ()) -> list[str]:
    with _private_redis(*config) as client:
        settings = Settings(
            redis_url="redis://127.0.0.1:6379/0",  # unused: the queue is given its client
            key_prefix="mwbsweep",
            queue_shards=shards,
            max_pending_per_namespace=1_000_000,
        )
        queue = RedisQueue(client, settings.for_queue)
        queue.admin.publish_policy()
        filler = Filler(queue)
        m = Measure(queue, filler)
        filler.fill_to(SMALL)
        m.sweep_ms()  # warm: script cache, connections
        used_small = int(client.info("memory")["used_memory"])
        small = (m.sweep_ms(), m.status_ms(), m.recount_ms())
        fill_seconds = filler.fill_to(namespaces)
        used_big = int(client.info("memory")["used_memory"])
        big_recount = m.recount_ms() if namespaces <= RECOUNT_UP_TO else None
        big = (m.sweep_ms(), m.status_ms())
        per_ns = (used_big - used_small) / (namespaces - SMALL)
        own_keys = _sample_bytes(client, queue)
        stats = queue.admin.stats(now=T0 + 1).scopes["user"]
        acked_bytes, acked_keys = _acked_leftover(client, queue, filler)
        version = client.info("server")["redis_version"]

    sweep_ratio, status_ratio = big[0] / small[0], big[1] / small[1]
    recount_big = f"{big_recount:,.0f} ms" if big_recount is not None else "skipped"
    return [
        f"Redis {version} (private, no persistence); {shards} shards; waiting namespaces created "
        f"through the enqueue script ({namespaces - SMALL:,} in {fill_seconds:.0f} s); "
        f"{DUE_PER_SWEEP} due per sweep; medians of {REPEATS}",
        f"{'':<36} {SMALL:>12,} {namespaces:>12,} waiting",
        f"{'sweep (claim + stats every sweep)':<36} {small[0]:>9.2f} ms {big[0]:>9.2f} ms   "
        f"{sweep_ratio:.2f}x (goal <= {GOAL}x: {verdict(sweep_ratio <= GOAL)})",
        f"{'status (queue stats)':<36} {small[1]:>9.2f} ms {big[1]:>9.2f} ms   "
        f"{status_ratio:.2f}x (goal <= {GOAL}x: {verdict(status_ratio <= GOAL)})",
        f"{'old full recount, for reference':<36} {small[2]:>9.2f} ms {recount_big:>12}",
        f"Redis memory per waiting namespace: {per_ns:,.0f} bytes (used_memory growth / "
        f"namespaces added); its own log + meta keys: {own_keys:,.0f} bytes (MEMORY USAGE, "
        f"{SAMPLE} sampled){' with ' + ' '.join(config) if config else ''}",
        f"after one batch each of {ACKED:,} more namespaces was claimed and acked: "
        f"{acked_bytes:,.0f} bytes per namespace and {acked_keys} of their keys left",
        f"stats at the end: {stats.waiting:,} waiting, {stats.due} due, {stats.leased:,} leased "
        f"({m.claimed:,} claimed by the timed sweeps)",
    ]


def run() -> list[str]:
    return measure(DEFAULT_NAMESPACES, DEFAULT_SHARDS)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench sweep", description=__doc__)
    parser.add_argument("--namespaces", type=int, default=DEFAULT_NAMESPACES)
    parser.add_argument("--shards", type=int, default=DEFAULT_SHARDS)
    parser.add_argument(
        "--stream-node-max-bytes",
        type=int,
        help="passed to the bench's redis-server (a one-entry stream preallocates this, at "
        "most 4096 bytes)",
    )
    opts = parser.parse_args(argv)
    config = (
        ("--stream-node-max-bytes", str(opts.stream_node_max_bytes))
        if opts.stream_node_max_bytes
        else ()
    )
    if opts.namespaces <= SMALL:
        parser.error(f"--namespaces must be above {SMALL}")
    print("== sweep")
    for line in measure(opts.namespaces, opts.shards, config):
        print("  ", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(["--namespaces", str(DEFAULT_NAMESPACES)]))
