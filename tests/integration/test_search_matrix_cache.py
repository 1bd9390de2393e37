"""A hybrid search and its cached matrix of a namespace's vectors: the matrix only proposes
candidates, so whatever the cache holds, a search returns active entries of its own namespace
only, and a change of the stored vectors (a commit, an erase, a model change, another process's
write) is seen by the next search.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from tests.store_support import at, commit, entry, plan, unique_ns
from tests.support.hashing_embeddings import HashingEmbeddings
from worker.service.search import EntryEmbedder, SqlMemorySearch
from worker.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _embedder(
    store: MemoryStore, embeddings: Embeddings | None = None, model: str = "hash:v1"
) -> EntryEmbedder:
    return EntryEmbedder(
        store=store,
        embeddings=embeddings or HashingEmbeddings(),
        model=model,
        clock=lambda: at(30),
        retry_wait_seconds=0,
    )


def _hybrid(store: MemoryStore, embedder: EntryEmbedder) -> SqlMemorySearch:
    return SqlMemorySearch(store, embedder)


def _texts(search: SqlMemorySearch, ns: str, query: str, limit: int = 5) -> list[str]:
    return [e.text for e in search.search_entries(ns, query, limit)]


def _teal_and_bike(store: MemoryStore, ns: str, *, expected: int = 0) -> EntryEmbedder:
    commit(
        store,
        ns,
        plan((entry("e1", "Favourite color is teal"), entry("e2", "Owns a bike"))),
        expected=expected,
    )
    embedder = _embedder(store)
    embedder.embed_namespace(ns)
    return embedder


class _RacingEmbeddings(HashingEmbeddings):
    """Runs ``race``, once set, inside the next query embedding: after the search has read the
    full-text hits and its matrix, before it reads the entries back."""

    race: Callable[[], None] | None = None

    def embed_query(self, text: str) -> list[float]:
        if self.race is not None:
            race, self.race = self.race, None
            race()
        return super().embed_query(text)


def test_a_cached_search_never_uses_the_vectors_of_an_erased_namespace(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    search = _hybrid(store, _teal_and_bike(store, ns))
    before = _texts(search, ns, "colour", limit=1)
    store.erase_namespaces([ns], now=at(5))
    erased = _texts(search, ns, "colour", limit=1)
    # The user returns: the same entry ids, each with the other's text.
    commit(
        store,
        ns,
        plan((entry("e1", "Owns a bike"), entry("e2", "Favourite color is teal"))),
        expected=store.load_state(ns).version,
    )
    _embedder(store).embed_namespace(ns)

    after = _texts(search, ns, "colour", limit=1)

    assert (before, erased, after) == (
        ["Favourite color is teal"],
        [],
        ["Favourite color is teal"],
    )


def test_a_cached_search_never_returns_an_entry_superseded_since(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    old = entry("e1", "Favourite color is teal", key="colour")
    commit(store, ns, plan((old, entry("e2", "Owns a bike"))), expected=0)
    embedder = _embedder(store)
    embedder.embed_namespace(ns)
    search = _hybrid(store, embedder)
    before = _texts(search, ns, "colour", limit=1)
    retired = old.model_copy(update={"invalid_at": at(2), "superseded_by": "e3"})
    new = entry("e3", "Favourite color is now amber", key="colour", now=at(2))
    commit(store, ns, plan((new,), (retired,)), expected=1, position="2-0")

    unembedded = _texts(search, ns, "colour", limit=5)
    embedder.embed_namespace(ns)
    embedded = _texts(search, ns, "colour", limit=1)

    assert before == ["Favourite color is teal"]
    assert "Favourite color is teal" not in unembedded
    assert embedded == ["Favourite color is now amber"]


def test_an_entry_retired_while_the_search_holds_its_matrix_is_not_returned(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    old = entry("e1", "Favourite color is teal", key="colour")
    commit(store, ns, plan((old, entry("e2", "Owns a bike"))), expected=0)
    _embedder(store).embed_namespace(ns)

    def supersede() -> None:
        retired = old.model_copy(update={"invalid_at": at(2), "superseded_by": "e3"})
        new = entry("e3", "Favourite color is now amber", key="colour", now=at(2))
        commit(store, ns, plan((new,), (retired,)), expected=1, position="2-0")

    racing = _RacingEmbeddings()
    search = _hybrid(store, _embedder(store, racing))
    search.search_entries(ns, "bike", 1)  # the matrix is cached with e1's vector
    racing.race = supersede

    during = _texts(search, ns, "favourite colour", limit=5)
    after = _texts(search, ns, "favourite colour", limit=5)

    assert "Favourite color is teal" not in during
    assert "Favourite color is teal" not in after
    assert "Favourite color is now amber" in after


def test_a_cached_search_of_a_replaced_model_falls_back_to_full_text(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    search_v1 = _hybrid(store, _teal_and_bike(store, ns))
    before = _texts(search_v1, ns, "colour", limit=1)
    newer = _embedder(store, HashingEmbeddings(dim=32), model="hash:v2")
    newer.embed_all([ns])

    stale_model = _texts(search_v1, ns, "colour", limit=1)
    new_model = _texts(_hybrid(store, newer), ns, "colour", limit=1)

    assert before == new_model == ["Favourite color is teal"]
    assert stale_model == []  # no vector of v1 is left; "colour" shares no word with any entry


def test_a_cached_search_sees_what_another_process_wrote(
    store: MemoryStore, database_url: str
) -> None:
    ns = unique_ns()
    search = _hybrid(store, _teal_and_bike(store, ns))
    before = _texts(search, ns, "colour", limit=1)
    script = textwrap.dedent(
        f"""
        from tests.store_support import at, commit, entry, plan
        from tests.support.hashing_embeddings import HashingEmbeddings
        from worker.service.search import EntryEmbedder
        from worker.store import MemoryStore

        store = MemoryStore.from_url({database_url!r})
        old = entry("e1", "Favourite color is teal")
        retired = old.model_copy(update={{"invalid_at": at(2), "superseded_by": "e3"}})
        new = entry("e3", "Favourite color is now amber", now=at(2))
        commit(store, {ns!r}, plan((new,), (retired,)), expected=1, position="2-0")
        EntryEmbedder(store=store, embeddings=HashingEmbeddings(), model="hash:v1",
                      clock=lambda: at(30)).embed_namespace({ns!r})
        store.dispose()
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)

    assert before == ["Favourite color is teal"]
    assert _texts(search, ns, "colour", limit=1) == ["Favourite color is now amber"]


def test_a_search_returns_only_its_own_namespace_entries(store: MemoryStore) -> None:
    ns, other = unique_ns(), unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bike"),)), expected=0)
    commit(store, other, plan((entry("e1", "Favourite color is teal"),)), expected=0)
    embedder = _embedder(store)
    for key in (ns, other):
        embedder.embed_namespace(key)
    search = _hybrid(store, embedder)
    search.search_entries(other, "colour", 5)  # both matrices cached

    assert _texts(search, ns, "colour teal favourite") == ["Owns a bike"]
