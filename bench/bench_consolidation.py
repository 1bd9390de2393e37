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

Baseline, same database kind, same run: the physical limit of the same work
(:mod:`bench._replay`). After each timed round, the rows the pipeline left for that round's
batches (namespace, ledger, entries, files, file versions, outbox, vectors, search documents and
full-text rows) are read back, untimed, and written by plain SQLAlchemy Core ``executemany``
into an empty migrated database of the same kind, one write transaction per batch, through the
store's own engine settings (WAL and ``BEGIN IMMEDIATE`` on SQLite). The goal is ≥ 0.5× its
rate; the pipeline's time per batch is split into the merge and the rest, and the rest into
the store's namespace read (``snapshot``) and fenced commit (``commit_batch``), the stream
read and the ack, and what is left (validating and applying the plan, the lease, the claims;
the sinks are written by the outbox, outside these figures). Each database runs twice: with
the default meaning model (the merge embeds every candidate: the model's time) and with
``embeddings="none"`` (the rules by words: what the pipeline itself costs).

Both databases run: a temporary SQLite file, and a throw-away PostgreSQL database (skipped with
a message when the server does not answer). Pipeline and baseline rounds are interleaved so
drift on a noisy machine hits both alike. Redis and PostgreSQL URLs: see :mod:`bench._support`.
"""

from __future__ import annotations

import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Final

import redis
import sqlalchemy as sa

from bench._merge_cases import merge_lines
from bench._replay import capture, replay
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
from worker.consolidation.plan import Consolidator, Plan
from worker.models import Candidate, NamespaceState, make_candidate
from worker.runtime.container import Runtime, build_runtime
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.engine import create_store_engine
from worker.store.schema import namespaces
from worker.types import DEFAULT_EMBEDDINGS

USERS: Final = 50
PER_USER: Final = 40
ROUNDS: Final = 3
#: Users of the untimed warm-up round (script cache, connection pools, first-use imports).
WARMUP_USERS: Final = 3
GOAL: Final = 0.5
#: The store's and the queue's calls of a batch, timed apart from the rest (``CallTimes``).
STORE_CALLS: Final = ("snapshot", "commit_batch")
QUEUE_CALLS: Final = ("read_batch", "ack")


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


class CallTimes:
    """Seconds spent in a few named calls of the pipeline's queue and store, per name: where
    the rest of a batch, outside the merge, goes."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    def time(self, owner: object, name: str) -> None:
        """Add up the time of every later call of ``owner.name`` (an instance's method)."""
        inner: Callable[..., object] = getattr(owner, name)

        def timed(*args: object, **kwargs: object) -> object:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        setattr(owner, name, timed)


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


def _round_namespaces(engine: sa.Engine, tag: str) -> list[int]:
    """Ids of the namespaces a round's users write (one batch each)."""
    query = sa.select(namespaces.c.id).where(namespaces.c.key.like(f"user:{tag}-u%"))
    with engine.connect() as conn:
        return sorted(conn.execute(query).scalars())


def _measure(
    database: str, url: str, limit_url: str, client: redis.Redis, embeddings: str
) -> list[str]:
    prefix = unique_prefix("c")
    with tempfile.TemporaryDirectory(prefix="mwbench-files-") as files:
        settings = Settings(
            redis_url=redis_url(), database_url=url, key_prefix=prefix,
            data_dir=Path(files), files_dir=Path(files), sinks=["files"],
            embeddings=embeddings,
        )  # fmt: skip
        runtime = build_runtime(settings)
        timed = TimedConsolidator(runtime.consolidator)
        pipeline = Pipeline(queue=runtime.queue, store=runtime.store, consolidator=timed,
                            settings=settings.for_consolidation,
                            sinks=tuple(runtime.sinks))  # fmt: skip
        calls = CallTimes()
        for owner, names in ((runtime.store, STORE_CALLS), (runtime.queue, QUEUE_CALLS)):
            for name in names:
                calls.time(owner, name)
        source, target = create_store_engine(url), create_store_engine(limit_url)
        try:
            _pipeline_round(runtime, pipeline, "warm", WARMUP_USERS)
            _limit_round(source, target, "warm")
            ours = limit = timed.seconds = 0.0
            calls.seconds.clear()
            rows = 0
            for r in range(ROUNDS):
                ours += _pipeline_round(runtime, pipeline, f"r{r}", USERS)
                seconds, written = _limit_round(source, target, f"r{r}")
                limit, rows = limit + seconds, rows + written
            version = source.dialect.server_version_info
        finally:
            runtime.close()
            source.dispose()
            target.dispose()
            delete_prefix(client, prefix)
    n, batches = ROUNDS * USERS * PER_USER, ROUNDS * USERS
    merge_ms, rest_ms = 1000 * timed.seconds / batches, 1000 * (ours - timed.seconds) / batches
    split = {name: 1000 * calls.seconds[name] / batches for name in (*STORE_CALLS, *QUEUE_CALLS)}
    other = rest_ms - sum(split.values())
    rate, limit_rate = n / ours, n / limit
    ratio = rate / limit_rate
    shown = ".".join(str(p) for p in version or ())
    return [
        f"{database} {shown}, embeddings {embeddings}: {n} candidates, "
        f"{batches} batches of {PER_USER}",
        f"  pipeline (claim→read→merge→commit→ack)   {rate:>9,.0f} candidates/s "
        f"({1000 * ours / batches:.1f} ms/batch: merge {merge_ms:.1f}, the rest {rest_ms:.1f})",
        "  the rest, ms/batch: "
        + ", ".join(f"{name} {ms:.1f}" for name, ms in split.items())
        + f", other {other:.1f} (validating and applying the plan, the lease, the claims)",
        f"  the same rows by plain SQL, 1 tx a batch {limit_rate:>9,.0f} candidates/s "
        f"({1000 * limit / batches:.1f} ms/batch; {rows / n:.1f} rows a candidate)",
        f"  pipeline / that limit: {ratio:.2f}x (goal >= {GOAL}x: {verdict(ratio >= GOAL)})",
    ]


def _limit_round(source: sa.Engine, target: sa.Engine, tag: str) -> tuple[float, int]:
    """Seconds to write, by plain SQL, the rows the pipeline left for a round's batches (read
    back untimed), one transaction a batch; and the rows written."""
    groups = _round_namespaces(source, tag)
    captured = capture(source, groups)
    started = time.perf_counter()
    written = replay(target, captured, groups)
    return time.perf_counter() - started, written


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
            for embeddings in (DEFAULT_EMBEDDINGS, "none"):  # the default model, then by words
                with make() as url, make() as limit_url:
                    lines += _measure(name, url, limit_url, client, embeddings)
    finally:
        client.close()
    return lines


if __name__ == "__main__":
    print(*run(), sep="\n")
