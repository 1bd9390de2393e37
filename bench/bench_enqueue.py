"""Hot-path enqueue: MemoryClient.enqueue against two baselines measured in the same run.

- **raw round trip**: one redis-py ``XADD`` per candidate carrying the same JSON, prepared in
  advance. This is the floor for "one network round trip"; the goal is ≥ 0.8× its rate
  (the client also validates the input, builds the candidate and runs the debounce script).
- **Celery**: one ``apply_async`` per candidate on the same Redis (publishing only, no worker),
  i.e. what "a task per message" would cost on the request path. Goal: ≥ 5× its rate.
- p99 latency of ``enqueue`` on loopback: goal < 1 ms.

Rounds are interleaved so drift on a noisy machine hits all three alike. Redis:
``MEMWORKER_BENCH_REDIS`` (default ``redis://127.0.0.1:6379/0``). Every key lives under a
unique prefix and is deleted afterwards.
"""

from __future__ import annotations

import os
import statistics
import uuid

import redis

from bench._support import timed
from worker import MemoryClient
from worker.models import EnqueueFields, make_candidate

#: Operations per round and rounds per contender: ~3 s in total on loopback.
OPS = 2000
CELERY_OPS = 500
ROUNDS = 3
#: Candidates per enqueue_many call (one pipelined round trip), as a summary flush sends them.
BATCH = 50
#: Users the candidates are spread over (one namespace each), like concurrent chats.
USERS = 100
TEXT = "I prefer my coffee black, and please answer in French from now on."


def _summary(name: str, latencies: list[float]) -> tuple[str, float, float, float]:
    rate = len(latencies) / sum(latencies)
    cuts = statistics.quantiles(latencies, n=100)
    p50, p99 = cuts[49] * 1e6, cuts[98] * 1e6
    line = f"{name:<34} {rate:>9,.0f} ops/s   p50 {p50:>6.0f} µs   p99 {p99:>6.0f} µs"
    return line, rate, p50, p99


def run() -> list[str]:
    url = os.environ.get("MEMWORKER_BENCH_REDIS", "redis://127.0.0.1:6379/0")
    prefix = "mwbench" + uuid.uuid4().hex[:8]
    celery_queue = f"{prefix}-celery"
    raw = redis.Redis.from_url(url)
    client = MemoryClient.from_url(url, key_prefix=prefix, max_pending_per_namespace=1_000_000)
    payload = make_candidate(user_id="u1", trace_id="bench", text=TEXT).model_dump_json()

    from celery import Celery

    celery = Celery("memworker-bench", broker=url, set_as_current=False)
    celery.conf.update(task_default_queue=celery_queue, broker_connection_retry_on_startup=False)

    @celery.task(name="bench.noop")  # type: ignore[untyped-decorator]
    def noop(candidate_json: str) -> None:  # pragma: no cover - never executed
        del candidate_json

    def ours(i: int) -> None:
        client.enqueue(user_id=f"u{i % USERS}", trace_id=f"t{i}", text=TEXT)

    def xadd(i: int) -> None:
        raw.xadd(f"{prefix}:raw:u{i % USERS}", {"c": payload, "i": str(i)})

    def apply_async(i: int) -> None:
        noop.apply_async(args=(payload,))

    batch: list[EnqueueFields] = [
        {"user_id": f"u{i % USERS}", "trace_id": f"t{i}", "text": TEXT} for i in range(BATCH)
    ]

    def many(i: int) -> None:
        client.enqueue_many(batch)

    results: dict[str, list[float]] = {"ours": [], "raw": [], "celery": [], "many": []}
    try:
        for warm in (ours, xadd, apply_async):  # connections, script cache, producer pool
            timed(warm, 50)
        for _ in range(ROUNDS):
            results["ours"] += timed(ours, OPS)
            results["raw"] += timed(xadd, OPS)
            results["celery"] += timed(apply_async, CELERY_OPS)
            results["many"] += timed(many, OPS // BATCH)
        info = raw.info("server")
    finally:
        client.close()
        # Ours live under `<prefix>:`; kombu adds `_kombu.binding*.<queue>` next to the queue.
        keys = list(raw.scan_iter(match=f"*{prefix}*", count=1000))
        if keys:
            raw.delete(*keys)
        raw.close()
        celery.close()

    line_ours, rate_ours, p50_ours, p99_ours = _summary("MemoryClient.enqueue", results["ours"])
    line_raw, rate_raw, p50_raw, _ = _summary("redis-py XADD, same JSON (raw RTT)", results["raw"])
    line_celery, rate_celery, _, _ = _summary(
        "Celery apply_async (publish only)", results["celery"]
    )
    many_rate = BATCH * len(results["many"]) / sum(results["many"])
    vs_raw = rate_ours / rate_raw
    vs_celery = rate_ours / rate_celery

    def verdict(ok: bool) -> str:
        return "ok" if ok else "MISSED"

    return [
        f"Redis {info['redis_version']} at {url}; {len(payload)}-byte candidates over {USERS} "
        f"users; {ROUNDS} interleaved rounds",
        line_ours,
        line_raw,
        line_celery,
        f"{'MemoryClient.enqueue_many':<34} {many_rate:>9,.0f} candidates/s in batches of {BATCH}",
        f"enqueue / raw round trip: {vs_raw:.2f}x (goal >= 0.8x: {verdict(vs_raw >= 0.8)})",
        # The rate is a mean, which a few stalls of a shared machine move; the medians show
        # the typical call (informational: the goal is the rate's).
        f"  the same from p50 latencies: {p50_raw / p50_ours:.2f}x",
        f"enqueue / apply_async:    {vs_celery:.1f}x (goal >= 5x: {verdict(vs_celery >= 5)})",
        f"enqueue p99:              {p99_ours / 1000:.3f} ms (goal < 1 ms: "
        f"{verdict(p99_ours < 1000)})",
    ]


if __name__ == "__main__":
    print("\n".join(run()))
