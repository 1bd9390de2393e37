"""The search index holds exactly the active entries of each namespace, moved by the commit.

Every write of entries (commit, supersede, forget, rollback, import, erase) moves the index in
its own transaction; a search returns active entries of the namespace asked for and nothing
else, whatever the query text.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.store_support import FACTS, at, commit, entry, plan, unique_ns
from worker.errors import ConfigurationError
from worker.models import Entry
from worker.store import MemoryStore, search_text
from worker.store import search as search_index
from worker.store.schema import namespaces


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _ids(store: MemoryStore, ns: str, query: str, limit: int = 10) -> list[str]:
    return [e.id for e in store.search_entries(ns, query, limit=limit)]


def _indexed(store: MemoryStore, ns: str) -> set[str]:
    """Entry ids the index holds for ``ns`` (read from its table directly)."""
    with store.engine.connect() as conn:
        ns_id = conn.execute(sa.select(namespaces.c.id).where(namespaces.c.key == ns)).scalar()
        rows = conn.exec_driver_sql(
            f"SELECT entry_id FROM {search_text.DOCS} WHERE namespace_id = {int(ns_id or -1)}"
        )
        return {r[0] for r in rows}


def _retired(e: Entry, *, by: str | None = None, reason: str = "superseded") -> Entry:
    return e.model_copy(update={"invalid_at": at(5), "invalid_reason": reason, "superseded_by": by})


def test_a_committed_entry_is_found_by_its_words(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(
        store,
        ns,
        plan((entry("e1", "Prefers green tea"), entry("e2", "Lives in Oslo"))),
        expected=0,
    )

    assert _ids(store, ns, "which tea does she drink?") == ["e1"]
    assert _ids(store, ns, "OSLO") == ["e2"]


def test_a_stemmed_word_finds_its_other_forms(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Went running with her dogs"),)), expected=0)

    assert _ids(store, ns, "does she run with a dog") == ["e1"]


def test_a_superseded_entry_is_no_longer_found_and_its_successor_is(store: MemoryStore) -> None:
    ns = unique_ns()
    old = entry("e1", "Lives in Paris", key="home.city")
    commit(store, ns, plan((old,)), expected=0)
    new = entry("e2", "Lives in Berlin", key="home.city", now=at(5))
    commit(store, ns, plan((new,), (_retired(old, by="e2"),)), expected=1, position="2-0")

    assert _ids(store, ns, "where does she live paris berlin") == ["e2"]
    assert _indexed(store, ns) == {"e2"}


def test_a_rewritten_entry_is_found_by_its_new_text_only(store: MemoryStore) -> None:
    ns = unique_ns()
    old = entry("e1", "Plays the violin")
    commit(store, ns, plan((old,)), expected=0)
    rewritten = old.model_copy(update={"text": "Plays the cello", "confirmations": 2})
    commit(store, ns, plan((), (rewritten,), candidates=("c-x",)), expected=1, position="2-0")

    assert _ids(store, ns, "violin") == []
    assert _ids(store, ns, "cello") == ["e1"]


def test_a_forgotten_entry_is_not_found(store: MemoryStore) -> None:
    ns = unique_ns()
    kept, gone = entry("e1", "Likes jazz music"), entry("e2", "Likes rock music")
    commit(store, ns, plan((kept, gone)), expected=0)
    forgotten = _retired(gone, reason="forgotten")
    commit(store, ns, plan((), (forgotten,), candidates=("c-f",)), expected=1, position="2-0")

    assert _ids(store, ns, "music") == ["e1"]


def test_an_erased_namespace_leaves_nothing_in_the_index(store: MemoryStore) -> None:
    ns, other = unique_ns(), unique_ns()
    commit(store, ns, plan((entry("e1", "Secret hobby is falconry"),)), expected=0)
    commit(store, other, plan((entry("o1", "Hobby is falconry too"),)), expected=0)
    with store.engine.connect() as conn:
        ns_id = conn.execute(sa.select(namespaces.c.id).where(namespaces.c.key == ns)).scalar()

    store.erase_namespaces([ns], now=at(9))

    assert _ids(store, ns, "falconry") == []
    assert _ids(store, other, "falconry") == ["o1"]
    with store.engine.connect() as conn:
        left = conn.exec_driver_sql(
            f"SELECT count(*) FROM {search_text.DOCS} WHERE namespace_id = {int(ns_id)}"
        ).scalar()
        if conn.dialect.name == "sqlite":  # the FTS rows themselves, not only the map
            fts = conn.exec_driver_sql(
                f"SELECT count(*) FROM {search_text.FTS} WHERE {search_text.FTS} MATCH ?",
                ("falconry",),
            ).scalar()
            assert fts == 1
    assert left == 0


def test_another_namespace_entries_are_never_returned(store: MemoryStore) -> None:
    ann, bob = unique_ns(), unique_ns()
    commit(store, ann, plan((entry("a1", "Prefers green tea"),)), expected=0)
    commit(
        store,
        bob,
        plan(tuple(entry(f"b{i}", f"Prefers black tea number {i}") for i in range(30))),
        expected=0,
    )

    assert _ids(store, ann, "black tea number 7", limit=50) == ["a1"]
    assert all(i.startswith("b") for i in _ids(store, bob, "green tea", limit=50))


def test_a_rollback_moves_the_index_with_the_entries(store: MemoryStore) -> None:
    ns = unique_ns()
    first = entry("e1", "Drives a red car")
    commit(store, ns, plan((first,)), expected=0)
    second = entry("e2", "Drives a blue car", now=at(3))
    commit(
        store,
        ns,
        plan((second,), (_retired(first, by="e2"),), files={FACTS: "- Drives a blue car\n"}),
        expected=1,
        position="2-0",
    )

    store.rollback_file(namespace=ns, path=FACTS, to_version=1, now=at(6))

    assert _ids(store, ns, "red blue car") == ["e1"]


def test_an_imported_namespace_is_searchable(store: MemoryStore) -> None:
    ns, copy = unique_ns(), unique_ns()
    commit(store, ns, plan((entry("e1", "Collects vinyl records"),)), expected=0)

    store.import_namespace(store.export_namespace(ns), namespace=copy, now=at(2))

    assert _ids(store, copy, "vinyl") == ["e1"]


def test_rare_words_outrank_words_every_entry_shares(store: MemoryStore) -> None:
    ns = unique_ns()
    filler = tuple(entry(f"f{i}", f"Melanie said she went out on day {i}") for i in range(20))
    target = entry("t1", "Melanie painted a sunrise over the lake")
    commit(store, ns, plan((*filler, target)), expected=0)

    assert _ids(store, ns, "What did Melanie paint?", limit=3)[0] == "t1"


def test_an_entry_holding_a_query_word_twice_outranks_one_holding_it_once(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    twice = entry("e1", "Bakes raspberry tarts with fresh raspberries")
    once = entry("e2", "Bakes lemon tarts with fresh raspberries")  # newer: first on a tie
    commit(store, ns, plan((twice, once)), expected=0)

    assert _ids(store, ns, "raspberries") == ["e1", "e2"]


def test_a_query_of_stopwords_only_still_searches_them(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Who is there"), entry("e2", "Lives alone"))), expected=0)

    assert _ids(store, ns, "who") == ["e1"]


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("我住在北京，喜欢喝茶", "北京"),
        ("我住在北京，喜欢喝茶", "喝茶"),
        ("東京に住んでいます", "東京"),
        ("コーヒーが大好きです", "コーヒー"),
        ("ผมชอบกินข้าวผัด", "ข้าวผัด"),
        ("मुझे हिन्दी संगीत पसंद है", "संगीत"),
        ("저는 서울에 살아요", "서울"),
        ("Wohnt in Zürich, mag Crème brûlée", "zurich creme brulee"),
    ],
)
def test_a_query_in_a_script_without_word_spaces_finds_its_entry(
    store: MemoryStore, text: str, query: str
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", text), entry("e2", "Prefers tea"))), expected=0)

    assert _ids(store, ns, query) == ["e1"]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"tea',
        "*",
        "tea*",
        "NEAR(tea green)",
        "NEAR(",
        "-tea",
        "words:tea",
        "ns : n1",
        "tea OR green AND NOT x",
        "^tea",
        "'tea' | 'green' & !x",
        "tea:*",
        "\\",
        "''",
        "(((",
        "",
        "   ",
        "\x00tea",
        "🍵",
        "tea " * 500,
    ],
)
def test_hostile_query_syntax_is_searched_as_text_and_never_raises(
    store: MemoryStore, query: str
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Prefers green tea"),)), expected=0)

    found = _ids(store, ns, query)

    assert found in ([], ["e1"])
    assert ("tea" in query.casefold()) == (found == ["e1"])


def test_the_index_holds_exactly_the_active_entries_after_many_commits(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    live = [entry(f"e{i}", f"Fact number {i} about gardening") for i in range(8)]
    commit(store, ns, plan(tuple(live)), expected=0)
    retired = [_retired(e) for e in live[:3]]
    added = [entry(f"n{i}", f"New fact {i}", now=at(5)) for i in range(2)]
    commit(store, ns, plan(tuple(added), tuple(retired)), expected=1, position="2-0")

    assert _indexed(store, ns) == {e.id for e in store.load_state(ns).entries}
    assert set(_ids(store, ns, "gardening")) == {f"e{i}" for i in range(3, 8)}


def test_an_unknown_namespace_finds_nothing(store: MemoryStore) -> None:
    assert store.search_entries(unique_ns(), "tea", limit=5) == []


@pytest.mark.postgres
def test_changing_the_text_search_configuration_rebuilds_the_index(
    pg_database_url: str,
) -> None:
    store = MemoryStore.from_url(pg_database_url, create=True)
    try:
        ns = unique_ns()
        commit(store, ns, plan((entry("e1", "Went running"),)), expected=0)

        rebuilt = store.configure_search("simple")
        unstemmed = _ids(store, ns, "run")
        store.configure_search("english")

        assert (rebuilt, unstemmed, _ids(store, ns, "run")) == (True, [], ["e1"])
        with pytest.raises(ConfigurationError, match="pg_ts_config"):
            store.configure_search("klingon")
    finally:
        store.dispose()


def test_a_rare_word_is_found_among_many_entries_sharing_a_common_one(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_index, "RARE_DOCS", 5)
    monkeypatch.setattr(search_index, "COMMON_WINDOW", 5)
    ns = unique_ns()
    target = entry("t1", "Melanie adopted a greyhound")
    filler = tuple(entry(f"f{i:02d}", f"Melanie went hiking, trip {i}") for i in range(30))
    commit(store, ns, plan((target, *filler)), expected=0)

    assert _ids(store, ns, "Did Melanie adopt a greyhound?", limit=3)[0] == "t1"


def test_a_query_of_common_words_only_ranks_the_newest_entries_holding_them(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_index, "RARE_DOCS", 5)
    monkeypatch.setattr(search_index, "COMMON_WINDOW", 5)
    ns = unique_ns()
    old = tuple(entry(f"a{i:02d}", f"Melanie went hiking, trip {i}") for i in range(20))
    commit(store, ns, plan(old), expected=0)
    new = tuple(entry(f"b{i}", f"Melanie went hiking again, trip {i}", now=at(1)) for i in range(3))
    commit(store, ns, plan(new), expected=1, position="2-0")

    found = _ids(store, ns, "melanie hiking", limit=3)

    assert len(found) == 3
    assert set(found) <= {"b0", "b1", "b2", "a19", "a18"}  # the five newest


def test_the_statistics_count_exactly_the_active_entries(store: MemoryStore) -> None:
    ns = unique_ns()
    live = [entry(f"e{i}", f"Fact {i} about birds") for i in range(6)]
    commit(store, ns, plan(tuple(live)), expected=0)
    retired = tuple(e.model_copy(update={"invalid_at": at(2)}) for e in live[:2])
    commit(store, ns, plan((), retired, candidates=("c-r",)), expected=1, position="2-0")

    with store.engine.connect() as conn:
        ns_id = conn.execute(sa.select(namespaces.c.id).where(namespaces.c.key == ns)).scalar()
        docs, total = conn.exec_driver_sql(
            f"SELECT docs, total_len FROM {search_text.STATS} WHERE namespace_id = {int(ns_id)}"
        ).one()
    assert (docs, total) == (4, 4 * 4)  # "fact", "N", "about", "birds": four terms each


def _index_rows(store: MemoryStore, ns: str) -> tuple[set[tuple[str, int]], tuple[int, int]]:
    """(entry id, length) of every indexed entry of ``ns``, and its statistics row."""
    with store.engine.connect() as conn:
        ns_id = int(conn.execute(sa.select(namespaces.c.id).where(namespaces.c.key == ns)).scalar())
        rows = conn.exec_driver_sql(
            f"SELECT entry_id, doc_len FROM {search_text.DOCS} WHERE namespace_id = {ns_id}"
        )
        stats = conn.exec_driver_sql(
            f"SELECT docs, total_len FROM {search_text.STATS} WHERE namespace_id = {ns_id}"
        ).one()
    return {(str(r[0]), int(r[1])) for r in rows}, (int(stats[0]), int(stats[1]))


def test_the_index_a_commit_writes_is_the_index_a_rebuild_writes(store: MemoryStore) -> None:
    ns = unique_ns()
    live = [entry(f"e{i}", f"Fact {i} about rivers and boats") for i in range(5)]
    commit(store, ns, plan(tuple(live)), expected=0)
    changed = (
        _retired(live[0]),
        live[1].model_copy(update={"text": "Rewritten fact about canals"}),
        live[2].model_copy(update={"confirmations": 2}),
    )
    added = (entry("n1", "A new fact about lakes", now=at(5)),)
    commit(store, ns, plan(added, changed), expected=1, position="2-0")
    by_commit = _index_rows(store, ns)

    store.rebuild_search()

    assert by_commit == _index_rows(store, ns)
    assert {e for e, _ in by_commit[0]} == {"e1", "e2", "e3", "e4", "n1"}
