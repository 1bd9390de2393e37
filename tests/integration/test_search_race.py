"""A search racing commits and an erase sees whole commits only, and never erased text.

Each commit retires the namespace's one "current" entry and adds its successor in the same
transaction, so any search at any moment must see exactly one of them: none would be a
half-commit, two a superseded entry still visible. An erase racing searches leaves each search
with the whole namespace or nothing, and nothing once it has returned.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from tests.store_support import at, commit, entry, plan, unique_ns
from worker.store import MemoryStore

COMMITS = 40
ENTRIES = 25


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _search_until(done: threading.Event, search: Callable[[], list[str]]) -> list[list[str]]:
    """Results of ``search`` run in a loop until ``done`` is set (and once more after)."""
    seen: list[list[str]] = []
    while not done.is_set():
        seen.append(search())
    seen.append(search())
    return seen


def _race(
    store: MemoryStore, writer: Callable[[], None], search: Callable[[], list[str]]
) -> list[list[str]]:
    done = threading.Event()
    results: list[list[list[str]]] = []
    reader = threading.Thread(target=lambda: results.append(_search_until(done, search)))
    reader.start()
    try:
        writer()
    finally:
        done.set()
        reader.join(timeout=60)
    assert results, "the reader thread failed"
    return results[0]


def test_a_search_racing_supersessions_always_sees_exactly_one_current_entry(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    first = entry("v0", "Current favourite colour is shade 0", key="colour")
    commit(store, ns, plan((first,)), expected=0)

    def writer() -> None:
        previous = first
        for n in range(1, COMMITS + 1):
            successor = entry(f"v{n}", f"Current favourite colour is shade {n}", key="colour")
            retired = previous.model_copy(
                update={
                    "invalid_at": at(n),
                    "invalid_reason": "superseded",
                    "superseded_by": successor.id,
                }
            )
            commit(store, ns, plan((successor,), (retired,)), expected=n, position=f"{n + 1}-0")
            previous = successor

    seen = _race(
        store,
        writer,
        lambda: [e.id for e in store.search_entries(ns, "favourite colour", limit=10)],
    )

    assert len(seen) > COMMITS // 4, "the reader should have searched while the writer ran"
    assert {len(ids) for ids in seen} == {1}
    assert seen[-1] == [f"v{COMMITS}"]


def test_a_search_racing_an_erase_sees_everything_or_nothing(store: MemoryStore) -> None:
    ns = unique_ns()
    rows = tuple(
        entry(f"e{i}", f"Private note {i} about the surprise party") for i in range(ENTRIES)
    )
    commit(store, ns, plan(rows), expected=0)
    everything = {f"e{i}" for i in range(ENTRIES)}
    started = threading.Event()

    def search() -> list[str]:
        started.set()
        return [e.id for e in store.search_entries(ns, "surprise party", limit=ENTRIES + 5)]

    def writer() -> None:
        started.wait(timeout=30)
        store.erase_namespaces([ns], now=at(3))

    seen = _race(store, writer, search)

    assert all(set(ids) in (everything, set()) for ids in seen)
    assert seen[-1] == []
    assert store.search_entries(ns, "surprise party", limit=50) == []
