"""Scanning the sources into the queue: one use case for schedules and for reconcile --since."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_fixtures import converse, langgraph_client, langgraph_url
from worker.connectors.langgraph import ThreadScan
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import scan_parts
from worker.service.scan import SourceScan, scan_sources
from worker.settings import Settings
from worker.store.memory import MemoryStore

__all__ = ["langgraph_client", "langgraph_url"]

T0 = datetime(2026, 1, 5, 9, tzinfo=UTC)


@pytest.fixture
def store(sqlite_store: MemoryStore) -> MemoryStore:
    """SQLite of this test alone."""
    return sqlite_store


def test_a_scan_filtered_to_some_namespaces_moves_only_their_threads_cursors() -> None:
    tea = make_candidate(user_id="a", trace_id="t", text="tea", thread_id="th-a", kind="turn")
    oslo = make_candidate(user_id="b", trace_id="t", text="Oslo", thread_id="th-b", kind="turn")
    scan = ThreadScan([tea, oslo], {"th-a": "m1", "th-b": "m2", "th-quiet": "m3"}, ["th-a"])

    kept = scan.only(lambda namespace: namespace == "user:a")

    assert kept.candidates == [tea]
    assert kept.cursor_updates == {"th-a": "m1", "th-quiet": "m3"}
    assert kept.threads_seen == ["th-a"]


def test_a_scan_with_no_source_configured_enqueues_nothing(
    queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    with scan_parts(settings) as parts:
        scan = scan_sources(
            queue, store, parts, start=T0 - timedelta(hours=6), end=T0, trace_id="t", now=T0
        )

    assert (scan.configured, scan.threads, scan.candidates) == (False, 0, ())
    assert list(queue.admin.namespaces()) == []


@pytest.mark.langgraph
def test_a_thread_a_scan_filtered_out_is_found_by_the_next_scan_that_wants_it(
    langgraph_client: SyncLangGraphClient,
    langgraph_url: str,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
    key_prefix: str,
) -> None:
    alice, bob = (f"u-{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob"))
    converse(langgraph_client, key_prefix, alice, "I prefer tea")
    converse(langgraph_client, key_prefix, bob, "I live in Oslo")
    cfg = settings.model_copy(update={"langgraph_url": langgraph_url})
    now = datetime.now(UTC)
    start, end = now - timedelta(hours=1), now + timedelta(minutes=1)

    def scan(trace_id: str, *users: str) -> SourceScan:
        wanted = {f"user:{u}" for u in users}
        with scan_parts(cfg) as parts:
            return scan_sources(
                queue, store, parts, start=start, end=end, trace_id=trace_id, now=now,
                keep=wanted.__contains__,
            )  # fmt: skip

    first = scan("t1", alice)
    second = scan("t2", alice, bob)

    assert list(first.by_namespace) == [f"user:{alice}"]
    assert list(second.by_namespace) == [f"user:{bob}"]  # alice's thread was consumed already
    [found] = second.by_namespace[f"user:{bob}"]
    assert found.text == "user: I live in Oslo\nassistant: echo: I live in Oslo"
    # Queued (beside the live capture's copy of the same turn, which has the same id).
    assert found.id in {c.id for _, c in queue.admin.pending(f"user:{bob}")}
    assert queue.admin.namespace_state(f"user:{bob}").known
