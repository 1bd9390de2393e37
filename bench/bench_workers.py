"""Scale-out: consolidation throughput with 1, 2 and 4 worker processes on PostgreSQL with the
files sink on, and outbox deliveries per committed version.

What runs: ``USERS`` users × ``PER_USER`` fact candidates are enqueued (untimed). Then N worker
processes (spawned, each with its own :class:`~worker.runtime.container.Runtime`, as N
``memworker worker`` hosts would have) do what the three lanes do, in a loop: claim due
namespaces (a few at a time), consolidate each claim, and run a delivery pass — every process
delivers, so claims are what keeps deliveries from doubling. Timed from a shared start signal
(process start-up and imports excluded) until the queue is empty and the outbox delivered.

Reported per N: candidates/s, its ratio to 1 worker in the same run (goals: never below 1×;
≥ 1.5× at 2 workers on two cores), CPU per candidate (the worker processes' user + system time
from the start signal to their end, over the candidates: the figure that shows contention when
the cores, shared with PostgreSQL and Redis, cap the throughput), and deliveries per committed
version (goal: 1.0): the outbox rows' recorded attempts over the file versions committed.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import tempfile
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import redis
import sqlalchemy as sa

from bench._support import (
    delete_prefix,
    postgres_reachable,
    redis_url,
    sentences,
    temp_postgres,
    unique_prefix,
    verdict,
)
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import build_runtime
from worker.service.publish import deliver_due
from worker.service.sweep import prepare_merges
from worker.settings import Settings

USERS: Final = 300
PER_USER: Final = 10
WORKERS: Final = (1, 2, 4)
#: Claims one worker takes per sweep: small, so the work spreads over the workers.
CLAIMS_PER_SWEEP: Final = 4
#: A run that has not drained by then is reported as failed (a hang, not a slow machine).
RUN_BOUND_SECONDS: Final = 600.0


def run() -> list[str]:
    why = postgres_reachable()
    if why is not None:
        return [f"skipped: PostgreSQL did not answer ({why})"]
    lines = []
    rates: dict[int, float] = {}
    for n in WORKERS:
        rate, per_version, cpu = _measure(n)
        rates[n] = rate
        ratio = rate / rates[1]
        goal = 1.5 if n == 2 else 1.0
        lines.append(
            f"{n} worker(s): {rate:7.0f} candidates/s  {ratio:4.2f}x of 1 worker "
            f"(goal >= {goal}x: {verdict(ratio >= goal or n == 1)})  "
            f"CPU {1e6 * cpu / (USERS * PER_USER):,.0f} us per candidate  "
            f"deliveries per version {per_version:.2f} (goal 1.00: {verdict(per_version == 1.0)})"
        )
    return lines


def _measure(workers: int) -> tuple[float, float, float]:
    """Candidates/s, deliveries per version, and the workers' CPU seconds (user + system)."""
    prefix = unique_prefix("w")
    data_dir = Path(tempfile.mkdtemp(prefix="mwbench-"))
    with temp_postgres() as db:
        settings = Settings(
            redis_url=redis_url(),
            database_url=db,
            key_prefix=prefix,
            data_dir=data_dir,
            sinks=["files"],
            debounce_seconds=1,
            max_wait_seconds=2,
        )
        client = redis.Redis.from_url(redis_url())
        try:
            _enqueue(RedisQueue(client, settings.for_queue), prefix)
            ctx = mp.get_context("spawn")
            go = ctx.Event()
            ready = ctx.Barrier(workers + 1)
            spent = ctx.Queue()
            procs = [
                ctx.Process(target=_worker, args=(settings, ready, go, spent))
                for _ in range(workers)
            ]
            for p in procs:
                p.start()
            ready.wait(timeout=120)
            started = time.perf_counter()
            go.set()
            cpu = sum(spent.get(timeout=RUN_BOUND_SECONDS) for _ in procs)
            for p in procs:
                p.join(RUN_BOUND_SECONDS)
            elapsed = time.perf_counter() - started
            if any(p.exitcode != 0 for p in procs):
                raise RuntimeError(f"a worker failed (exit codes {[p.exitcode for p in procs]})")
            per_version = _deliveries_per_version(db)
        finally:
            delete_prefix(client, prefix)
            client.close()
            shutil.rmtree(data_dir, ignore_errors=True)
    return USERS * PER_USER / elapsed, per_version, cpu


def _enqueue(queue: RedisQueue, tag: str) -> None:
    created = datetime.now(UTC)
    for u in range(USERS):
        user = f"{tag}-u{u}"
        queue.enqueue_many(
            [
                make_candidate(user_id=user, trace_id=f"{user}-t{i}", text=text, now=created)
                for i, text in enumerate(sentences(zlib.crc32(user.encode()), PER_USER))
            ]
        )


def _worker(settings: Settings, ready: object, go: object, spent: object) -> None:
    """One worker host: claim a few, merge them, deliver; until nothing is left."""
    runtime = build_runtime(settings)
    queue, pipeline, store = runtime.queue, runtime.pipeline, runtime.store
    prepare_merges()  # as a consolidate lane does before it takes work
    future = queue.server_ms() / 1000 + 3600  # everything is due (the queue's test hook)
    ready.wait()  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    began = os.times()
    idle = 0
    while idle < 3:
        claims = queue.claim_due(now=future, limit=CLAIMS_PER_SWEEP)
        for claim in claims:
            pipeline.consolidate(claim)
        report = deliver_due(store, runtime.sinks, now=datetime.now(UTC), gate=runtime.sink_gate)
        idle = 0 if claims or report.delivered else idle + 1
    ended = os.times()
    spent.put(ended.user - began.user + ended.system - began.system)  # type: ignore[attr-defined]
    runtime.close()


def _deliveries_per_version(db: str) -> float:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            attempts = conn.exec_driver_sql("SELECT coalesce(sum(attempts), 0) FROM outbox")
            versions = conn.exec_driver_sql("SELECT count(*) FROM file_versions")
            return float(attempts.scalar_one()) / max(int(versions.scalar_one()), 1)
    finally:
        engine.dispose()
