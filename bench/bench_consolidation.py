"""Consolidation throughput: candidates/s through claim → read → merge → commit → ack.

First, merge-only figures (:mod:`bench._merge_cases`): the adversarial worst-case batch against
a typical batch of the same size, and the rules consolidator's throughput with the current
matcher against the difflib one it replaced.

What runs: ``USERS`` users × ``PER_USER`` distinct ``fact`` candidates are enqueued (untimed)
with the worker's :class:`~worker.queue.redis_queue.RedisQueue`; then, timed, sweeps
(``claim_due``) and :meth:`Pipeline.consolidate` with the default rules consolidator and the
``files`` sink (so outbox rows are written too) consume them — one batch per user, as the
debounced queue makes them. Every batch is the full production path: read the stream, load the
namespace state, ledger lookup, merge, validate, apply, one commit transaction (fence, run,
entries, file version, outbox, ledger), token-checked ack.

Baseline, same database kind, same run: a raw SQLAlchemy Core ``executemany`` of the same number
of ``candidate_ledger`` rows (prepared in advance), one write transaction per user batch — the
same commit count as the pipeline, through the store's own engine settings (WAL and
``BEGIN IMMEDIATE`` on SQLite). This is the floor for "durably record that each candidate was
consumed"; the goal is ≥ 0.5× its rate. A single-transaction insert of all rows is printed for
information only (it is a different commit granularity).

Both databases run: a temporary SQLite file, and a throw-away PostgreSQL database (skipped with
a message when the server does not answer). Pipeline and baseline rounds are interleaved so
drift on a noisy machine hits both alike. Redis and PostgreSQL URLs: see :mod:`bench._support`.
"""

from __future__ import annotations

import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Final

import redis
import sqlalchemy as sa

from bench._merge_cases import merge_lines
from bench._support import (
    delete_prefix,
    drain,
    postgres_reachable,
    redis_url,
    sentences,
    temp_postgres,
    temp_sqlite,
    unique_prefix,
    verdict,
)
from worker.consolidation.base import Consolidator
from worker.consolidation.types import Plan
from worker.models import Candidate, make_candidate
from worker.runtime.container import Runtime, build_runtime
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.engine import create_store_engine, write_transaction
from worker.store.schema import candidate_ledger, namespaces
from worker.values import NamespaceState

USERS: Final = 50
PER_USER: Final = 40
ROUNDS: Final = 3
#: Users of the untimed warm-up round (script cache, connection pools, first-use imports).
WARMUP_USERS: Final = 3
GOAL: Final = 0.5


def _enqueue(runtime: Runtime, tag: str, users: int, now: float) -> None:
    """``users`` × ``PER_USER`` distinct fact candidates, one pipelined call per user."""
    created = datetime.fromtimestamp(now, UTC)
    for u in range(users):
        user = f"{tag}-u{u}"
        batch = [
            make_candidate(user_id=user, trace_id=f"{user}-t{i}", text=text,
                           idempotency_key=f"{user}-{i}", now=created)
            for i, text in enumerate(sentences(zlib.crc32(user.encode()), PER_USER))
        ]  # fmt: skip
        runtime.queue.enqueue_many(batch, now=now)


class TimedConsolidator:
    """The rules consolidator, with the time spent in its ``merge`` added up."""

    name: ClassVar[str] = "rules"
    needs_model: ClassVar[bool] = False
    handles_turns: ClassVar[bool] = True

    def __init__(self, inner: Consolidator) -> None:
        self.inner = inner
        self.seconds = 0.0

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        started = time.perf_counter()
        try:
            return self.inner.merge(state, batch, now=now)
        finally:
            self.seconds += time.perf_counter() - started


def _pipeline_round(runtime: Runtime, pipeline: Pipeline, tag: str, users: int) -> float:
    """Seconds to consolidate ``users`` × ``PER_USER`` fresh candidates; checks the outcomes."""
    now = time.time()
    _enqueue(runtime, tag, users, now)
    due = now + runtime.settings.max_wait_seconds + 1
    started = time.perf_counter()
    outcomes = drain(runtime.queue, pipeline, now=due)
    seconds = time.perf_counter() - started
    if outcomes["candidates"] != users * PER_USER or outcomes["committed"] != users:
        raise RuntimeError(f"expected {users * PER_USER} candidates in {users} commits, "
                           f"got {dict(outcomes)}")  # fmt: skip
    return seconds


def _baseline_rows(engine: sa.Engine, tag: str) -> list[list[dict[str, Any]]]:
    """Per user, ledger rows like the pipeline writes; their namespace rows exist already."""
    now = datetime.now(UTC)
    keys = [f"user:{tag}-u{u}" for u in range(USERS)]
    with write_transaction(engine) as conn:
        conn.execute(
            sa.insert(namespaces),
            [{"key": k, "scope": "user", "user_id": k[5:], "version": 0, "created_at": now,
              "updated_at": now} for k in keys],
        )  # fmt: skip
        ids = dict(conn.execute(sa.select(namespaces.c.key, namespaces.c.id).where(
            namespaces.c.key.in_(keys))).tuples().all())  # fmt: skip
    return [
        [{"namespace_id": ids[k], "candidate_id": uuid.uuid4().hex, "trace_id": f"t{i}",
          "outcome": "merged", "reason": None, "entry_id": f"e{u}-{i}", "run_id": None,
          "created_at": now} for i in range(PER_USER)]
        for u, k in enumerate(keys)
    ]  # fmt: skip


def _baseline_round(engine: sa.Engine, tag: str) -> tuple[float, float]:
    """Seconds for the per-batch inserts, then for one single-transaction insert (fresh rows)."""
    per_batch = _baseline_rows(engine, f"{tag}a")
    started = time.perf_counter()
    for rows in per_batch:
        with write_transaction(engine) as conn:
            conn.execute(sa.insert(candidate_ledger), rows)
    batched = time.perf_counter() - started
    single = [row for rows in _baseline_rows(engine, f"{tag}b") for row in rows]
    started = time.perf_counter()
    with write_transaction(engine) as conn:
        conn.execute(sa.insert(candidate_ledger), single)
    return batched, time.perf_counter() - started


def _measure(database: str, url: str, client: redis.Redis) -> list[str]:
    prefix = unique_prefix("c")
    with tempfile.TemporaryDirectory(prefix="mwbench-files-") as files:
        settings = Settings(
            redis_url=redis_url(), database_url=url, key_prefix=prefix,
            data_dir=Path(files), files_dir=Path(files), sinks=["files"],
        )  # fmt: skip
        runtime = build_runtime(settings)
        timed = TimedConsolidator(runtime.consolidator)
        pipeline = Pipeline(queue=runtime.queue, store=runtime.store, consolidator=timed,
                            settings=settings.for_consolidation,
                            sinks=tuple(runtime.sinks))  # fmt: skip
        engine = create_store_engine(url)
        try:
            _pipeline_round(runtime, pipeline, "warm", WARMUP_USERS)
            _baseline_round(engine, "warm")
            ours = base = single = timed.seconds = 0.0
            for r in range(ROUNDS):
                ours += _pipeline_round(runtime, pipeline, f"r{r}", USERS)
                batched, one_tx = _baseline_round(engine, f"r{r}")
                base, single = base + batched, single + one_tx
            version = engine.dialect.server_version_info
        finally:
            runtime.close()
            engine.dispose()
            delete_prefix(client, prefix)
    n, batches = ROUNDS * USERS * PER_USER, ROUNDS * USERS
    merge_ms, rest_ms = 1000 * timed.seconds / batches, 1000 * (ours - timed.seconds) / batches
    rate, base_rate, single_rate = n / ours, n / base, n / single
    ratio = rate / base_rate
    shown = ".".join(str(p) for p in version or ())
    return [
        f"{database} {shown}: {n} candidates, {ROUNDS * USERS} batches of {PER_USER}",
        f"  pipeline (claim→read→merge→commit→ack)   {rate:>9,.0f} candidates/s "
        f"({1000 * ours / batches:.1f} ms/batch: merge {merge_ms:.1f}, the rest {rest_ms:.1f})",
        f"  raw Core insert, 1 tx per batch          {base_rate:>9,.0f} rows/s",
        f"  raw Core insert, 1 tx for all (info)     {single_rate:>9,.0f} rows/s",
        f"  pipeline / raw per-batch insert: {ratio:.2f}x "
        f"(goal >= {GOAL}x: {verdict(ratio >= GOAL)})",
    ]


def run() -> list[str]:
    client = redis.Redis.from_url(redis_url())
    lines = merge_lines()
    lines.append(f"rules consolidator, files sink; {ROUNDS} interleaved rounds per database")
    databases: list[tuple[str, Callable[[], AbstractContextManager[str]]]] = [
        ("SQLite", temp_sqlite)
    ]
    why = postgres_reachable()
    if why is None:
        databases.insert(0, ("PostgreSQL", temp_postgres))
    else:
        lines.append(f"PostgreSQL skipped: server not reachable ({why})")
    try:
        for name, make in databases:
            with make() as url:
                lines += _measure(name, url, client)
    finally:
        client.close()
    return lines


if __name__ == "__main__":
    print(*run(), sep="\n")
