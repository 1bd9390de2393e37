"""Compaction: files over their byte budget lose their least valuable entries, as a new version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.operator import RunContext, compact_files
from worker.settings import Settings
from worker.store.memory import MemoryStore

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
FACTS = [f"My colleague number {n} is called Person{n} and works in team {n}" for n in range(12)]


@pytest.fixture
def store(sqlite_store: MemoryStore) -> MemoryStore:
    """SQLite of this test alone."""
    return sqlite_store


@pytest.fixture
def filled(queue: RedisQueue, store: MemoryStore, settings: Settings, key_prefix: str) -> str:
    """A namespace whose facts file holds twelve entries under a generous budget."""
    user = "u-" + key_prefix
    for text in FACTS:
        queue.enqueue(make_candidate(user_id=user, trace_id="t1", text=text, topic="facts"))
    claim = queue.claim_namespace(f"user:{user}")
    assert claim is not None
    consolidator = RulesConsolidator.from_settings(settings.for_consolidation)
    p = Pipeline(
        queue=queue, store=store, consolidator=consolidator, settings=settings.for_consolidation
    )
    assert p.consolidate(claim).outcome == "committed"
    return f"user:{user}"


def file_bytes(store: MemoryStore, ns: str) -> int:
    return len(store.current_files(ns)["/memories/facts.md"].encode())


def test_a_lowered_budget_evicts_entries_as_a_new_version_of_the_file(
    store: MemoryStore, settings: Settings, filled: str
) -> None:
    before = file_bytes(store, filled)
    tighter = settings.model_copy(update={"file_budget_bytes": before // 2})
    window = (T0 - timedelta(days=1), T0)

    report = compact_files(
        store, tighter.for_consolidation, sinks=(), scope="user", now=T0,
        context=RunContext(schedule="nightly", window=window),
    )  # fmt: skip

    assert (report.namespaces, report.stale) == (1, 0)
    assert report.evicted > 0
    assert file_bytes(store, filled) <= before // 2
    assert [v.version for v in store.file_history(filled, "/memories/facts.md")] == [1, 2]
    run = store.runs(namespace=filled, limit=1)[0]
    assert (run.trigger, run.schedule, run.outcome) == ("schedule", "nightly", "ok")


def test_files_within_their_budget_are_left_as_they_are(
    store: MemoryStore, settings: Settings, filled: str
) -> None:
    report = compact_files(store, settings.for_consolidation, sinks=(), scope="user", now=T0)

    assert [v.version for v in store.file_history(filled, "/memories/facts.md")] == [1]
    assert report.evicted == 0
