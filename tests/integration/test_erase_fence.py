"""Erase takes the SQL fence: a commit that read a namespace before its erase writes nothing.

The store's part of a fenced erase, on SQLite and PostgreSQL. The race with a real worker and
the CLI is ``test_erase_race.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Final

import pytest
import sqlalchemy as sa

from tests.store_support import FACTS, T0, at, commit, entry, plan, unique_ns
from worker.errors import StaleVersion
from worker.store import MemoryStore
from worker.store.schema import metadata

#: Texts unique to this run: the PostgreSQL database is shared by every test of the session.
CAT: Final = "Miso" + uuid.uuid4().hex[:8]
TEA: Final = "tea" + uuid.uuid4().hex[:8]


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _mentions(store: MemoryStore, needle: str) -> list[str]:
    with store.engine.connect() as conn:
        return [
            table.name
            for table in metadata.sorted_tables
            for row in conn.execute(sa.select(table))
            if needle in repr(tuple(row))
        ]


def test_a_first_commit_that_read_the_namespace_before_its_erase_is_stale(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    read = store.load_state(ns)  # a worker reads the new namespace (version 0) ...
    store.erase_namespaces([ns], now=T0)  # ... the user is erased meanwhile ...

    with pytest.raises(StaleVersion, match="was erased after this batch read it"):
        commit(store, ns, plan((entry("e1", f"my cat is called {CAT}"),)), expected=read.version)
    assert _mentions(store, CAT) == []
    assert _mentions(store, ns.split(":")[1]) == []


def test_a_later_commit_that_read_the_namespace_before_its_erase_is_stale(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", f"Likes {TEA}"),)), expected=0)
    read = store.load_state(ns)
    store.erase_namespaces([ns], now=at(1))

    with pytest.raises(StaleVersion):
        commit(store, ns, plan((entry("e2", f"my cat is called {CAT}"),)), expected=read.version)
    assert _mentions(store, CAT) == []
    assert _mentions(store, TEA) == []


def test_the_first_commit_after_an_erase_starts_above_the_fence(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", f"Likes {TEA}"),)), expected=0)
    store.erase_namespaces([ns], now=at(1))
    after = store.load_state(ns)

    done = commit(store, ns, plan((entry("e2", "Likes coffee"),)), expected=after.version)

    assert after.version == 2  # version 1 was erased: the fence is one above it
    assert done.version == 3
    assert store.current_files(ns) == {FACTS: "- Likes coffee\n"}
    assert not store.was_erased(ns)


def test_an_erase_fence_names_no_user(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", f"Likes {TEA}"),)), expected=0)

    store.erase_namespaces([ns], now=at(1))

    assert store.was_erased(ns)
    assert _mentions(store, ns.split(":")[1]) == []
