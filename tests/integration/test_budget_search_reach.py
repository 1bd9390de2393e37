"""A file over its budget leaves entries out of the file, never out of search."""

from __future__ import annotations

import pytest

from worker.consolidation.render import is_pointer_line
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.search import SqlMemorySearch
from worker.settings import Settings
from worker.store.memory import MemoryStore

FACTS = [f"My colleague number {n} is called Person{n} and works in team {n}" for n in range(12)]


@pytest.fixture
def store(sqlite_store: MemoryStore) -> MemoryStore:
    """SQLite of this test alone."""
    return sqlite_store


def test_entries_left_out_of_a_file_stay_active_and_search_finds_them(
    queue: RedisQueue, store: MemoryStore, settings: Settings, key_prefix: str
) -> None:
    user = "u-" + key_prefix
    tight = settings.model_copy(update={"file_budget_bytes": 256})
    for text in FACTS:
        queue.enqueue(make_candidate(user_id=user, trace_id="t1", text=text, topic="facts"))
    claim = queue.claim_namespace(f"user:{user}")
    assert claim is not None
    pipeline = Pipeline(
        queue=queue, store=store,
        consolidator=RulesConsolidator.from_settings(tight.for_consolidation),
        settings=tight.for_consolidation,
    )  # fmt: skip
    assert pipeline.consolidate(claim).outcome == "committed"

    namespace = f"user:{user}"
    content = store.current_files(namespace)["/memories/facts.md"]
    assert len(content.encode()) <= 256
    assert is_pointer_line(content.splitlines()[-1])
    active = [e for e in store.load_state(namespace).entries if e.active]
    assert len(active) == len(FACTS)
    hidden = [e for e in active if e.text not in content]
    assert hidden
    search = SqlMemorySearch(store)
    for e in hidden:
        hits = search.search(namespace, e.text, limit=3)
        assert e.text in [h.text for h in hits]
