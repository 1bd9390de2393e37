"""Optional embeddings: stored after the commit, searched by cosine and fused with full text,
erased with their entries, re-made when the model changes; a failing or hanging provider never
fails a commit and never hides an entry from a search."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from langchain_core.embeddings import Embeddings

from tests.store_support import at, commit, entry, plan, unique_ns
from tests.support.hashing_embeddings import (
    FailingEmbeddings,
    HangingEmbeddings,
    HashingEmbeddings,
)
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import build_runtime
from worker.service.consolidate import Pipeline
from worker.service.search import EntryEmbedder, SqlMemorySearch
from worker.settings import Settings
from worker.store import MemoryStore
from worker.store.schema import entry_vectors, namespaces
from worker.store.search import Embedded
from worker.types import DEFAULT_EMBEDDINGS, Outcome


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _embedder(
    store: MemoryStore, embeddings: Embeddings, model: str = "hash:v1", timeout: float = 5.0
) -> EntryEmbedder:
    return EntryEmbedder(
        store=store,
        embeddings=embeddings,
        model=model,
        timeout_seconds=timeout,
        clock=lambda: at(30),
        retry_wait_seconds=0,
    )


def _vectors(store: MemoryStore, ns: str) -> dict[str, tuple[str, int]]:
    """entry id → (model, dim) of the vectors stored for ``ns``."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(entry_vectors.c.entry_id, entry_vectors.c.model, entry_vectors.c.dim)
            .join(namespaces, namespaces.c.id == entry_vectors.c.namespace_id)
            .where(namespaces.c.key == ns)
        )
        return {r.entry_id: (r.model, r.dim) for r in rows}


def _search(search: SqlMemorySearch, ns: str, query: str, limit: int = 5) -> list[str]:
    return [e.id for e in search.search_entries(ns, query, limit)]


def test_embedding_a_namespace_stores_a_vector_per_active_entry_with_model_and_dim(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bicycle"), entry("e2", "Likes teal"))), expected=0)

    stored = _embedder(store, HashingEmbeddings(dim=64)).embed_namespace(ns)

    assert stored == 2
    assert _vectors(store, ns) == {"e1": ("hash:v1", 64), "e2": ("hash:v1", 64)}


def test_hybrid_search_finds_an_entry_only_its_vector_matches(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(
        store,
        ns,
        plan((entry("e1", "Favourite color is teal"), entry("e2", "Owns a bike"))),
        expected=0,
    )
    embedder = _embedder(store, HashingEmbeddings())
    embedder.embed_namespace(ns)

    assert _search(SqlMemorySearch(store), ns, "colour") == []
    assert _search(SqlMemorySearch(store, embedder), ns, "colour")[0] == "e1"


def test_an_entry_without_a_vector_yet_is_still_found_by_its_words(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bicycle"),)), expected=0)
    embedder = _embedder(store, HashingEmbeddings())
    embedder.embed_namespace(ns)
    commit(store, ns, plan((entry("e2", "Plays chess on sundays"),)), expected=1, position="2-0")

    assert _search(SqlMemorySearch(store, embedder), ns, "chess")[0] == "e2"
    assert "e2" not in _vectors(store, ns)


def test_a_superseded_entry_loses_its_vector_and_the_search_never_returns_it(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    old = entry("e1", "Lives in Paris", key="home")
    commit(store, ns, plan((old,)), expected=0)
    embedder = _embedder(store, HashingEmbeddings())
    embedder.embed_namespace(ns)
    retired = old.model_copy(update={"invalid_at": at(2), "superseded_by": "e2"})
    new = entry("e2", "Lives in Berlin", key="home", now=at(2))
    commit(store, ns, plan((new,), (retired,)), expected=1, position="2-0")

    assert _vectors(store, ns) == {}
    assert _search(SqlMemorySearch(store, embedder), ns, "Lives in Paris", limit=10) == ["e2"]


def test_erasing_a_namespace_erases_its_vectors(store: MemoryStore) -> None:
    ns, other = unique_ns(), unique_ns()
    for key in (ns, other):
        commit(store, key, plan((entry("e1", "Owns a bicycle"),)), expected=0)
        _embedder(store, HashingEmbeddings()).embed_namespace(key)

    store.erase_namespaces([ns], now=at(5))

    assert (_vectors(store, ns), list(_vectors(store, other))) == ({}, ["e1"])


def test_a_model_change_re_embeds_every_entry(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan(tuple(entry(f"e{i}", f"Fact {i}") for i in range(3))), expected=0)
    _embedder(store, HashingEmbeddings(dim=64), model="hash:v1").embed_namespace(ns)
    newer = _embedder(store, HashingEmbeddings(dim=32), model="hash:v2")

    pending = store.pending_embeddings(ns, "hash:v2", limit=10)
    newer.embed_all([ns])

    assert len(pending) == 3
    assert set(_vectors(store, ns).values()) == {("hash:v2", 32)}
    assert _search(SqlMemorySearch(store, newer), ns, "Fact 1")[0] == "e1"


def test_a_vector_of_text_that_changed_meanwhile_is_not_stored(store: MemoryStore) -> None:
    ns = unique_ns()
    old = entry("e1", "Plays the violin")
    commit(store, ns, plan((old,)), expected=0)
    (pending,) = store.pending_embeddings(ns, "hash:v1", limit=10)
    rewritten = old.model_copy(update={"text": "Plays the cello"})
    commit(store, ns, plan((), (rewritten,), candidates=("c-x",)), expected=1, position="2-0")

    stored = store.store_embeddings(
        ns, "hash:v1", [Embedded("e1", pending.text, b"\0" * 16, 4)], now=at(3)
    )

    assert (stored, _vectors(store, ns)) == (0, {})


def test_a_failing_query_embedding_falls_back_to_full_text(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bicycle"),)), expected=0)
    _embedder(store, HashingEmbeddings()).embed_namespace(ns)

    found = _search(SqlMemorySearch(store, _embedder(store, FailingEmbeddings())), ns, "bicycle")

    assert found == ["e1"]


def _consolidate(
    queue: RedisQueue, store: MemoryStore, settings: Settings, embedder: EntryEmbedder
) -> tuple[str, Outcome]:
    user = f"u-{uuid.uuid4().hex[:8]}"
    queue.enqueue(make_candidate(user_id=user, trace_id="t1", text="prefers green tea"))
    claim = queue.claim_namespace(f"user:{user}")
    assert claim is not None
    pipeline = Pipeline(
        queue=queue,
        store=store,
        consolidator=RulesConsolidator.from_settings(settings.for_consolidation),
        settings=settings.for_consolidation,
        embedder=embedder,
    )
    return f"user:{user}", pipeline.consolidate(claim).outcome


def test_a_failing_provider_does_not_fail_the_commit(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    failing = FailingEmbeddings()

    ns, outcome = _consolidate(queue, sqlite_store, settings, _embedder(sqlite_store, failing))

    assert outcome is Outcome.COMMITTED
    assert failing.calls == 3  # retried, then left for the next commit
    assert _vectors(sqlite_store, ns) == {}
    assert [e.text for e in sqlite_store.search_entries(ns, "tea", limit=5)] == [
        "prefers green tea"
    ]


def test_a_hanging_provider_does_not_hold_the_commit(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    hanging = HangingEmbeddings()
    try:
        embedder = _embedder(sqlite_store, hanging, timeout=0.2)
        ns, outcome = _consolidate(queue, sqlite_store, settings, embedder)
    finally:
        hanging.release()

    assert outcome is Outcome.COMMITTED
    assert _vectors(sqlite_store, ns) == {}
    assert sqlite_store.pending_embeddings(ns, "hash:v1", limit=5)[0].text == "prefers green tea"


def test_a_working_provider_embeds_the_batch_after_its_commit(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    ns, outcome = _consolidate(
        queue, sqlite_store, settings, _embedder(sqlite_store, HashingEmbeddings(dim=16))
    )

    assert outcome is Outcome.COMMITTED
    assert list(_vectors(sqlite_store, ns).values()) == [("hash:v1", 16)]


def test_the_same_search_object_sees_new_vectors_and_never_a_retired_entry(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    old = entry("e1", "Favourite color is teal", key="colour")
    commit(store, ns, plan((old,)), expected=0)
    embedder = _embedder(store, HashingEmbeddings())
    embedder.embed_namespace(ns)
    search = SqlMemorySearch(store, embedder)
    before = _search(search, ns, "colour")
    retired = old.model_copy(update={"invalid_at": at(2), "superseded_by": "e2"})
    new = entry("e2", "Favourite color is now amber", key="colour", now=at(2))
    commit(store, ns, plan((new,), (retired,)), expected=1, position="2-0")
    embedder.embed_namespace(ns)

    assert (before, _search(search, ns, "colour")) == (["e1"], ["e2"])


def test_a_hybrid_search_asks_the_model_once_per_query_even_after_a_commit(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bicycle"),)), expected=0)
    _embedder(store, HashingEmbeddings()).embed_namespace(ns)
    queries = HashingEmbeddings()
    search = SqlMemorySearch(store, _embedder(store, queries))
    _search(search, ns, "bicycle")  # the first: the matrix is read
    _search(search, ns, "bicycle")  # the matrix kept: embedded before the transaction
    later = entry("e2", "Owns a bicycle bell", now=at(2))
    commit(store, ns, plan((later,)), expected=1, position="2-0")
    found = _search(search, ns, "bicycle")  # embedded before, the matrix then read again

    assert (queries.calls, sorted(found)) == (3, ["e1", "e2"])


def test_a_hybrid_search_of_a_namespace_without_vectors_never_asks_the_model(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bicycle"),)), expected=0)
    queries = HashingEmbeddings()
    search = SqlMemorySearch(store, _embedder(store, queries))

    found = [_search(search, ns, "bicycle") for _ in range(3)]

    assert (queries.calls, found) == (0, [["e1"]] * 3)


def test_a_hybrid_search_with_its_matrix_kept_is_one_read_transaction(
    store: MemoryStore,
) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Owns a bicycle"),)), expected=0)
    _embedder(store, HashingEmbeddings()).embed_namespace(ns)
    search = SqlMemorySearch(store, _embedder(store, HashingEmbeddings()))
    _search(search, ns, "bicycle")
    begun: list[object] = []

    def count(conn: object) -> None:
        begun.append(conn)

    sa.event.listen(store.engine, "begin", count)
    try:
        found = _search(search, ns, "bicycle")
    finally:
        sa.event.remove(store.engine, "begin", count)

    assert (len(begun), found) == (1, ["e1"])


# --- attacks: a hung provider, and vectors unfit to rank with ----------------------------------
class _PoisonedEmbeddings(HashingEmbeddings):
    """Hashing vectors, except ``bad`` for the query (``query``) or for texts naming
    ``poison`` (``documents``): a provider answering NaN, infinity, zeros or another size."""

    def __init__(self, bad: list[float], *, query: bool = False, poison: str = "") -> None:
        super().__init__()
        self.bad, self.query, self.poison = bad, query, poison

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        good = super().embed_documents(texts)
        return [
            self.bad if self.poison and self.poison in t else v
            for t, v in zip(texts, good, strict=True)
        ]

    def embed_query(self, text: str) -> list[float]:
        return self.bad if self.query else super().embed_query(text)


NAN, INF = float("nan"), float("inf")
BAD_VECTORS = {
    "nan": [NAN] * 64,
    "one_nan": [1.0] * 63 + [NAN],
    "infinite": [INF] + [0.0] * 63,
    "zero": [0.0] * 64,
}
PEOPLE = (
    entry("e1", "My sister lives in Oslo"),
    entry("e2", "Allergic to peanuts since childhood"),
    entry("e3", "Works as a nurse in Bergen"),
    entry("e4", "Has a peanut butter allergy story to tell"),
    entry("e5", "Plays the cello on weekends"),
    entry("e6", "Owns a red bicycle"),
)


@pytest.mark.parametrize("bad", list(BAD_VECTORS), ids=list(BAD_VECTORS))
def test_a_query_vector_unfit_to_rank_with_falls_back_to_the_full_text_ranking(
    store: MemoryStore, bad: str
) -> None:
    ns = unique_ns()
    commit(store, ns, plan(PEOPLE), expected=0)
    _embedder(store, HashingEmbeddings()).embed_namespace(ns)
    search = SqlMemorySearch(
        store, _embedder(store, _PoisonedEmbeddings(BAD_VECTORS[bad], query=True))
    )
    words = [e.id for e in store.search_entries(ns, "peanuts allergy", limit=5)]

    first = _search(search, ns, "peanuts allergy")  # the matrix is read
    kept = _search(search, ns, "peanuts allergy")  # the matrix kept

    assert words
    assert (first, kept) == (words, words)


@pytest.mark.parametrize("bad", [*BAD_VECTORS, "short"])
def test_a_document_vector_unfit_to_rank_with_is_not_stored_and_its_entry_is_found_by_words(
    store: MemoryStore, bad: str
) -> None:
    ns = unique_ns()
    commit(store, ns, plan(PEOPLE), expected=0)
    vector = BAD_VECTORS.get(bad, [0.5] * 63)  # "short": 63 values among vectors of 64

    stored = _embedder(store, _PoisonedEmbeddings(vector, poison="cello")).embed_namespace(ns)

    assert stored == 5
    assert "e5" not in _vectors(store, ns)
    search = SqlMemorySearch(store, _embedder(store, HashingEmbeddings()))
    assert _search(search, ns, "cello")[0] == "e5"


def test_a_vector_stored_unchecked_earlier_does_not_change_any_ranking(store: MemoryStore) -> None:
    poisoned, clean = unique_ns(), unique_ns()
    (cello,) = [e for e in PEOPLE if e.id == "e5"]
    for ns in (poisoned, clean):
        commit(store, ns, plan(tuple(e for e in PEOPLE if e is not cello)), expected=0)
        _embedder(store, HashingEmbeddings()).embed_namespace(ns)
        commit(store, ns, plan((cello,)), expected=1, position="2-0")  # not embedded yet
    # Before vectors were checked, a NaN vector reached the store through its own interface.
    nan = Embedded(cello.id, cello.text, bytes(np.full(64, np.nan, np.float32)), 64)
    assert store.store_embeddings(poisoned, "hash:v1", [nan], now=at(31)) == 1
    search = SqlMemorySearch(store, _embedder(store, HashingEmbeddings()))

    for query in ("peanuts allergy", "cello", "sister in Oslo"):
        assert _search(search, poisoned, query) == _search(search, clean, query), query


def test_a_hung_provider_holds_a_commits_embedding_for_one_deadline_in_all(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    deadline = 1.0
    hanging = HangingEmbeddings()
    try:
        embedder = _embedder(sqlite_store, hanging, timeout=deadline)
        began = time.monotonic()
        ns, outcome = _consolidate(queue, sqlite_store, settings, embedder)
        held = time.monotonic() - began
    finally:
        hanging.release()

    assert outcome is Outcome.COMMITTED
    # A deadline per attempt held it three deadlines (3.5-3.75 with the default backoff).
    assert deadline <= held < 2 * deadline
    assert sqlite_store.pending_embeddings(ns, "hash:v1", limit=5)[0].text == "prefers green tea"


#: A small memory of the multilingual paraphrase set's development half (``bench/data``):
#: "How do I keep fit?" shares no word with its answer, and by the fused cosine alone a job,
#: a diet and a hike rank before it.
FIT = (
    "I knit scarves while watching TV.", "My daughter collects stamps.",
    "Spiders give me the creeps.", "I follow a strict vegan diet.",
    "My father loves barbecue.", "My dentist appointment is on Friday at nine.",
    "My dentist retired last year.", "My sister's name is Clara.",
    "My sister lives in Canada.", "Peanuts make my throat swell up.",
    "The book I'm reading now is a Japanese crime novel.",
    "I lent my favourite book to a colleague.", "I start each day with green tea.",
    "I grew up in a fishing village up north.", "My parents moved to the city last year.",
    "I repair lifts in office towers.", "My wife Ana teaches chemistry at a high school.",
    "I own an old red Volvo.", "The bus to town is always late.",
    "A grey rabbit hops around my kitchen.", "I swim laps every Tuesday morning.",
    "My knee hurt after the hike.",
)  # fmt: skip


def test_the_runtimes_search_lifts_the_entry_about_what_was_asked_into_the_first_five(
    redis_url: str, sqlite_url: str, tmp_path: Path
) -> None:
    settings = Settings(redis_url=redis_url, database_url=sqlite_url, data_dir=tmp_path,
                        files_dir=tmp_path, key_prefix=f"t{uuid.uuid4().hex[:8]}",
                        embeddings=DEFAULT_EMBEDDINGS)  # fmt: skip
    runtime = build_runtime(settings)
    try:
        ns = unique_ns()
        entries = tuple(entry(f"e{n}", text) for n, text in enumerate(FIT))
        commit(runtime.store, ns, plan(entries), expected=0)
        assert runtime.embedder is not None
        runtime.embedder.embed_all([ns])

        found = runtime.memory_search.search_entries(ns, "How do I keep fit?", 5)

        assert "I swim laps every Tuesday morning." in [e.text for e in found]
    finally:
        runtime.close()
