"""The outbox: due → delivered or failed → retried; newer versions retire older deliveries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.store_support import FACTS, at, commit, entry, plan, render, unique_ns
from worker.errors import NotFound
from worker.store import MemoryStore


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


@pytest.fixture
def sink() -> str:
    """A sink name of this test only (the PostgreSQL database is shared by the session)."""
    return "sink-" + unique_ns().split(":")[1]


def test_due_item_carries_the_committed_content(store: MemoryStore, sink: str) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Likes tea"),)), expected=0, sinks=(sink,), now=at(0))

    [item] = store.due_outbox(sink=sink, now=at(0))

    assert (item.namespace, item.path, item.version, item.content) == (
        ns,
        FACTS,
        1,
        "- Likes tea\n",
    )
    assert (item.deleted, item.attempts, item.created_at, item.modified_at) == (
        False,
        0,
        at(0),
        at(0),
    )


def test_delivered_item_is_no_longer_due(store: MemoryStore, sink: str) -> None:
    commit(store, unique_ns(), plan((entry("e1", "x"),)), expected=0, sinks=(sink,))
    [item] = store.due_outbox(sink=sink, now=at(0))

    store.mark_delivered(item.id, now=at(1))

    assert store.due_outbox(sink=sink, now=at(10)) == []


def test_failed_item_is_due_again_at_its_next_attempt(store: MemoryStore, sink: str) -> None:
    commit(store, unique_ns(), plan((entry("e1", "x"),)), expected=0, sinks=(sink,))
    [item] = store.due_outbox(sink=sink, now=at(0))

    store.mark_delivery_failed(item.id, "sink down", next_attempt_at=at(5), now=at(1))

    assert store.due_outbox(sink=sink, now=at(4)) == []
    [retry] = store.due_outbox(sink=sink, now=at(5))
    assert (retry.id, retry.attempts, retry.last_error) == (item.id, 1, "sink down")


def test_newer_version_retires_the_older_pending_delivery(store: MemoryStore, sink: str) -> None:
    ns = unique_ns()
    e1, e2 = entry("e1", "A"), entry("e2", "B", now=at(1))
    commit(store, ns, plan((e1,)), expected=0, sinks=(sink,))
    commit(
        store, ns, plan((e2,), files={FACTS: render(e1, e2)}), expected=1, sinks=(sink,), now=at(1)
    )

    [item] = store.due_outbox(sink=sink, now=at(1))
    store.mark_delivered(item.id, now=at(2))

    assert item.version == 2
    assert store.outbox_lag(now=at(2)).get(sink) is None
    assert store.due_outbox(sink=sink, now=at(100)) == []


def test_outbox_lag_counts_pending_items_and_oldest_age(store: MemoryStore, sink: str) -> None:
    commit(store, unique_ns(), plan((entry("e1", "x"),)), expected=0, sinks=(sink,), now=at(0))
    commit(store, unique_ns(), plan((entry("e1", "y"),)), expected=0, sinks=(sink,), now=at(1))

    lag = store.outbox_lag(now=at(3))[sink]

    assert (lag.pending, lag.oldest_age_seconds) == (2, 180.0)


def test_marking_an_unknown_item_is_not_found(store: MemoryStore) -> None:
    with pytest.raises(NotFound, match="does not exist"):
        store.mark_delivered(10**12, now=at(0))
