"""Helpers shared by the benchmarks: service URLs, throw-away databases, key cleanup, drains.

Benchmarks are an edge, so they may read the environment:

- ``MEMWORKER_BENCH_REDIS`` — Redis URL (default ``redis://127.0.0.1:6379/0``). Every bench
  works under a unique key prefix and deletes exactly those keys afterwards (never FLUSHDB).
- ``MEMWORKER_BENCH_PG`` — a PostgreSQL *server* URL whose database is used only to
  ``CREATE DATABASE`` a throw-away database for the run, dropped afterwards (default
  ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import redis
import sqlalchemy as sa

from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.store.memory import MemoryStore

REDIS_URL_ENV = "MEMWORKER_BENCH_REDIS"
PG_URL_ENV = "MEMWORKER_BENCH_PG"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"

#: Keys per UNLINK call when cleaning up.
UNLINK_CHUNK = 1000


def redis_url() -> str:
    return os.environ.get(REDIS_URL_ENV, DEFAULT_REDIS_URL)


def pg_server_url() -> str:
    return os.environ.get(PG_URL_ENV, DEFAULT_PG_URL)


def unique_prefix(tag: str) -> str:
    """A fresh Redis key prefix (``mwb<tag><hex>``), valid as ``Settings.key_prefix``."""
    return f"mwb{tag}{uuid.uuid4().hex[:8]}"


def delete_prefix(client: redis.Redis, prefix: str) -> int:
    """UNLINK every key under ``<prefix>:``; returns how many were removed."""
    removed = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}:*", count=UNLINK_CHUNK):
        batch.append(key)
        if len(batch) >= UNLINK_CHUNK:
            removed += int(client.unlink(*batch))
            batch.clear()
    if batch:
        removed += int(client.unlink(*batch))
    return removed


def timed(op: Callable[[int], object], n: int) -> list[float]:
    """Latency of each of ``n`` calls of ``op(i)``, in seconds."""
    out = []
    clock = time.perf_counter
    for i in range(n):
        start = clock()
        op(i)
        out.append(clock() - start)
    return out


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def percentile(values: Sequence[float], pct: int) -> float:
    """The ``pct``-th percentile (1…99) of ``values``."""
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


@contextmanager
def temp_sqlite() -> Iterator[str]:
    """URL of a migrated SQLite file in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="mwbench-") as folder:
        url = f"sqlite:///{Path(folder) / 'memworker.sqlite3'}"
        MemoryStore.from_url(url, create=True).dispose()
        yield url


def postgres_reachable() -> str | None:
    """None when the PostgreSQL server answers, else why not (for a skip message)."""
    engine = sa.create_engine(pg_server_url(), connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except sa.exc.SQLAlchemyError as exc:
        return str(getattr(exc, "orig", exc)).strip().splitlines()[0]
    finally:
        engine.dispose()
    return None


@contextmanager
def temp_postgres() -> Iterator[str]:
    """URL of a throw-away, migrated PostgreSQL database, dropped (forcibly) afterwards."""
    name = "mwbench_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(pg_server_url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        url = sa.engine.make_url(pg_server_url()).set(database=name)
        rendered = url.render_as_string(hide_password=False)
        try:
            MemoryStore.from_url(rendered, create=True).dispose()
            yield rendered
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


def drain(queue: RedisQueue, pipeline: Pipeline, *, now: float) -> Counter[str]:
    """Sweep at ``now`` and consolidate every claim until nothing is due; outcome counts.

    Each claim covers at most ``max_batch`` candidates; a namespace with a longer backlog is
    re-armed by its ack and claimed again by the next sweep, as in production.
    """
    outcomes: Counter[str] = Counter()
    while claims := queue.claim_due(now=now):
        for claim in claims:
            result = pipeline.consolidate(claim)
            outcomes[result.outcome] += 1
            outcomes["candidates"] += result.candidates
    return outcomes


_SUBJECTS = (
    "My sister", "My neighbour", "Our team lead", "My landlord", "The dentist", "My cousin",
    "Our dog", "My manager", "The book club", "My running partner", "Our babysitter",
    "My grandfather", "The piano teacher", "My flatmate", "Our accountant", "My best friend",
)  # fmt: skip
_VERBS = (
    "prefers", "recommends", "collects", "repairs", "photographs", "avoids", "paints",
    "sells", "studies", "cooks", "grows", "reviews", "borrows", "restores", "sketches",
    "translates", "teaches", "rents", "orders", "builds",
)  # fmt: skip
_ADJECTIVES = (
    "vintage", "spicy", "handmade", "Japanese", "oversized", "electric", "organic", "tiny",
    "Portuguese", "wooden", "noisy", "seasonal", "striped", "antique", "frozen", "Nordic",
    "ceramic", "second-hand", "miniature", "colourful",
)  # fmt: skip
_OBJECTS = (
    "bicycles", "teapots", "maps", "keyboards", "lanterns", "puzzles", "sourdough loaves",
    "cameras", "violins", "succulents", "sneakers", "comic books", "fountain pens", "kites",
    "board games", "postcards", "umbrellas", "chess sets", "vinyl records", "garden gnomes",
)  # fmt: skip
_PLACES = (
    "in Lisbon", "near the harbour", "on weekends", "after work", "at the flea market",
    "every spring", "in the garage", "with her kids", "for the school fair", "in Osaka",
    "during the holidays", "on the balcony", "at the community centre", "before breakfast",
    "in the old mill", "by the river",
)  # fmt: skip


def sentences(seed: int, count: int) -> list[str]:
    """``count`` distinct fact-like sentences without digits, deterministic for ``seed``.

    Built from word lists so that the rules consolidator's fuzzy de-duplication runs its real
    comparisons (texts differing in a number are ruled out early, which would flatter it), while
    no two sentences are near-duplicates and nothing trips a guard rail.
    """
    import random

    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        text = (
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_ADJECTIVES)} "
            f"{rng.choice(_OBJECTS)} {rng.choice(_PLACES)}"
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out
