"""File history: rollback appends a version, operator files are read-only for the consolidator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.store_support import FACTS, T0, at, commit, entry, plan, render, unique_ns
from worker.errors import NotFound
from worker.store import MemoryStore


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _two_versions(store: MemoryStore, ns: str) -> None:
    tea = entry("e1", "Likes tea")
    commit(store, ns, plan((tea,)), expected=0)
    coffee = entry("e2", "Likes coffee", now=at(1))
    gone = tea.model_copy(update={"invalid_at": at(1), "invalid_reason": "superseded"})
    commit(
        store, ns, plan((coffee,), (gone,), files={FACTS: render(coffee)}), expected=1, now=at(1)
    )


def test_rollback_adds_a_new_version_equal_to_the_old_one(store: MemoryStore) -> None:
    ns = unique_ns()
    _two_versions(store, ns)

    result = store.rollback_file(
        namespace=ns, path=FACTS, to_version=1, author="operator:ana", sinks=("files",), now=at(2)
    )

    history = store.file_history(ns, FACTS)
    assert [v.version for v in history] == [1, 2, 3]
    assert history[2].content == history[0].content == "- Likes tea\n"
    assert history[1].content == "- Likes coffee\n"
    assert (history[2].author, result.files, result.version) == ("operator:ana", ((FACTS, 3),), 3)
    assert "-- Likes coffee" in history[2].diff
    assert store.current_files(ns) == {FACTS: "- Likes tea\n"}
    assert len(result.outbox_ids) == 1


def test_rollback_restores_the_entries_active_at_that_version(store: MemoryStore) -> None:
    ns = unique_ns()
    _two_versions(store, ns)

    store.rollback_file(namespace=ns, path=FACTS, to_version=1, now=at(2))

    assert [e.text for e in store.load_state(ns).entries] == ["Likes tea"]


def test_rollback_makes_a_concurrent_consolidation_stale(store: MemoryStore) -> None:
    from worker.errors import StaleVersion

    ns = unique_ns()
    _two_versions(store, ns)
    read = store.load_state(ns).version

    store.rollback_file(namespace=ns, path=FACTS, to_version=1, now=at(2))

    with pytest.raises(StaleVersion):
        commit(store, ns, plan((entry("e3", "x"),)), expected=read, now=at(3))


def test_rollback_to_a_missing_version_names_the_existing_ones(store: MemoryStore) -> None:
    ns = unique_ns()
    _two_versions(store, ns)

    with pytest.raises(NotFound, match="versions 1 to 2"):
        store.rollback_file(namespace=ns, path=FACTS, to_version=7, now=at(2))


def test_file_version_reads_one_version(store: MemoryStore) -> None:
    ns = unique_ns()
    _two_versions(store, ns)

    v1 = store.file_version(ns, FACTS, 1)

    assert (v1.content, v1.author, v1.created_at) == ("- Likes tea\n", "consolidator", T0)


def test_put_file_writes_an_operator_file_that_is_read_only(store: MemoryStore) -> None:
    ns = unique_ns()

    result = store.put_file(
        namespace=ns, path="policies", content="Be nice\n", author="operator:ana", now=T0
    )

    assert result.files == (("/memories/policies.md", 1),)
    assert store.load_state(ns).read_only_paths == frozenset({"/memories/policies.md"})
    [info] = store.list_files(ns)
    assert (info.operator_owned, info.size, info.current_version) == (True, 8, 1)


def test_namespaces_filter_by_scope_and_user(store: MemoryStore) -> None:
    ns = unique_ns()
    user = ns.split(":")[1]
    commit(store, ns, plan((entry("e1", "x"),)), expected=0)
    store.put_file(namespace=f"agent:{user}bot", path="a", content="x", author="operator:a", now=T0)

    assert store.namespaces(user_id=user) == [ns]
    assert f"agent:{user}bot" in store.namespaces(scope="agent")
    assert ns not in store.namespaces(scope="agent")
