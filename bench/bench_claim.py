"""Claim latency: sweeping one due namespace among 1k vs 1M idle namespaces.

A sweep (``RedisQueue.claim_due``: one pipelined round trip running the claim script on every
shard) must cost the same whether a thousand or a million users have candidates waiting out
their debounce: it reads only the *due* head of each shard's due set (``ZRANGEBYSCORE -inf now``),
so idle namespaces should not matter. Goal: p50 and p99 with 1M idle ≤ 1.5× those with 1k.

Setup: two deployments (key prefixes) on the same Redis, each with one real namespace whose
candidate was enqueued through the queue, plus 1k or 1M *idle* namespaces, i.e. members of the
shard due sets (built with :class:`~worker.queue.scripts.QueueLayout`, so each lands in its real
shard) scored an hour in the future — not due yet. Creating a million namespaces through the
enqueue script would take minutes, so the idle members are synthetic: pipelined ``ZADD`` of
names ``user:idle<i>`` without log or meta keys. That is exactly the state the claim script
sees for a waiting namespace; it never reads a namespace's keys before it is due.

Measured: ``claim_due(now)`` latency on the client, one claim of the real namespace each time;
between claims (untimed) ``release`` makes it due again. Rounds alternate between the two
deployments so drift hits both alike. Cleanup UNLINKs every key of both prefixes (the due sets
hold ~100 MB for 1M members).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

import redis

from bench._support import delete_prefix, percentile, redis_url, unique_prefix, verdict
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.queue.scripts import QueueLayout
from worker.settings import Settings

SIZES: Final = (1_000, 1_000_000)
ROUNDS: Final = 10
CLAIMS_PER_ROUND: Final = 1000
#: Members per ZADD command and commands per pipeline round trip while populating.
ZADD_CHUNK: Final = 1000
PIPELINE_COMMANDS: Final = 50
GOAL: Final = 1.5


@dataclass
class Deployment:
    idle: int
    queue: RedisQueue
    namespace: str
    latencies: list[float]


def _populate(client: redis.Redis, layout: QueueLayout, idle: int, score_ms: int) -> float:
    """ZADD ``idle`` synthetic waiting namespaces into their shards' due sets; seconds taken."""
    started = time.perf_counter()
    pending: dict[int, dict[str, int]] = {}
    pipe = client.pipeline(transaction=False)
    queued = 0
    for i in range(idle):
        member = f"user:idle{i}"
        shard = layout.shard(member)
        chunk = pending.setdefault(shard, {})
        chunk[member] = score_ms
        if len(chunk) >= ZADD_CHUNK:
            pipe.zadd(layout.due(shard), pending.pop(shard))
            queued += 1
            if queued % PIPELINE_COMMANDS == 0:
                pipe.execute()
    for shard, chunk in pending.items():
        pipe.zadd(layout.due(shard), chunk)
    pipe.execute()
    return time.perf_counter() - started


def _setup(client: redis.Redis, idle: int, now: float) -> Deployment:
    settings = Settings(redis_url=redis_url(), key_prefix=unique_prefix("k"))
    queue = RedisQueue(client, settings.for_queue)
    candidate = make_candidate(user_id="due-user", trace_id="t1", text="I prefer green tea")
    queue.enqueue(candidate, now=now)
    _populate(client, queue.layout, idle, int((now + 3600) * 1000))
    return Deployment(idle, queue, candidate.namespace, [])


def _round(d: Deployment, now: float) -> None:
    clock = time.perf_counter
    for _ in range(CLAIMS_PER_ROUND):
        start = clock()
        claims = d.queue.claim_due(now=now)
        d.latencies.append(clock() - start)
        if len(claims) != 1 or claims[0].namespace != d.namespace:
            raise RuntimeError(f"expected one claim of {d.namespace}, got {claims}")
        d.queue.release(claims[0], now=now)


def run() -> list[str]:
    client = redis.Redis.from_url(redis_url())
    now = time.time()
    due = now + Settings().max_wait_seconds + 1  # the real namespace is due, the idle ones not
    deployments: list[Deployment] = []
    try:
        started = time.perf_counter()
        for idle in SIZES:
            deployments.append(_setup(client, idle, now))
        populated = time.perf_counter() - started
        used = client.info("memory")["used_memory"]
        for d in deployments:  # warm-up: script cache, connection
            _round(d, due)
            d.latencies.clear()
        for _ in range(ROUNDS):
            for d in deployments:
                _round(d, due)
        version = client.info("server")["redis_version"]
        shards = deployments[0].queue.settings.queue_shards
    finally:
        for d in deployments:
            delete_prefix(client, d.queue.settings.key_prefix)
        client.close()
    small, large = deployments
    p50 = [percentile(d.latencies, 50) * 1e6 for d in deployments]
    p99 = [percentile(d.latencies, 99) * 1e6 for d in deployments]
    r50, r99 = p50[1] / p50[0], p99[1] / p99[0]
    claims = ROUNDS * CLAIMS_PER_ROUND
    return [
        f"Redis {version}, {shards} shards; idle namespaces populated in {populated:.1f} s "
        f"(Redis used_memory {used / 2**20:.0f} MiB); {claims} claims each, {ROUNDS} "
        "alternating rounds",
        f"{small.idle:>9,} idle: claim_due p50 {p50[0]:6.0f} µs   p99 {p99[0]:6.0f} µs",
        f"{large.idle:>9,} idle: claim_due p50 {p50[1]:6.0f} µs   p99 {p99[1]:6.0f} µs",
        f"1M / 1k: p50 {r50:.2f}x, p99 {r99:.2f}x (goal <= {GOAL}x: "
        f"{verdict(max(r50, r99) <= GOAL)})",
    ]


if __name__ == "__main__":
    print(*run(), sep="\n")
