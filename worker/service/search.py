"""Memory search: committed entries embedded after each commit, and hybrid search over them.

Embedding: the consolidation task calls :meth:`EntryEmbedder.embed_namespace` after its batch
is committed and acknowledged, never inside the commit, and it never raises: a provider that
fails, hangs or is misconfigured leaves the entries without a vector (search still finds them
by their words) and the next commit of the namespace tries again. The whole call has one
deadline, ``timeout_seconds`` in all (:func:`~worker.consolidation.meaning.embed_within`), and
every vector is checked (finite, the namespace's dimension, non-zero length) before it is
stored. Entries whose vector came from another model count as unembedded, so changing
``MEMWORKER_EMBEDDINGS`` re-embeds every namespace as it is next consolidated, or all at once
with :meth:`EntryEmbedder.embed_all`.

Search (the backend of the ``search_memory`` tool): full text first, the store's BM25-ranked
index (:mod:`worker.store.search`) over every active entry of the namespace, kept by the
commit itself, so a search never sees a half-commit, a superseded, erased or foreign entry.
With embeddings configured, the query's cosine to the namespace's vectors orders everything,
and the full-text top :data:`LEXICAL_DEPTH` are lifted by a bonus measured in this query's own
spread of cosines (:data:`LEXICAL_WEIGHT`, :func:`fuse_scores`), so the same rule holds for a
model or a language whose cosines crowd into a narrow band. Given the consolidator's
:class:`~worker.consolidation.meaning.Meaning`, the hits after the first are then re-ordered
by what they are about (:func:`by_kinds`). A namespace without vectors, or a model that fails
or hangs, gives the full-text ranking alone.

The vectors are read once per namespace into a matrix kept between queries and checked
against the store's fingerprint of them on every query: any commit or vector change of the
namespace, by any process, moves it, and the matrix is read again. The cosine is brute force
over every row (a user's memory stays far below the sizes where an approximate index would
pay for itself). The matrix does not decide what is returned: the ranked ids are read back
from SQL as active entries of the namespace, so a stale matrix can propose a retired, erased
or foreign entry but never return it. With the matrix kept, a query is one read transaction:
the query is embedded before it opens, and the full-text ranking, the fingerprint, the fused
ranking and the entries read back share its snapshot.

Why not reciprocal-rank fusion: it discards the cosine's magnitude, so a dense first place
barely ahead of the tenth counts as much as a clear one. ``python -m bench search --fusion``
prints the measurements behind the constants below.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, TypedDict, Unpack

import numpy as np
from langchain_core.embeddings import Embeddings

from worker.consolidation.meaning import (
    EMBED_BATCH,
    DeadlinePassed,
    Meaning,
    Vector,
    embed_within,
    usable_vector,
    within,
)
from worker.errors import MemworkerError, ModelUnavailable
from worker.models import Entry, MemoryHit
from worker.store.memory import MemoryStore
from worker.store.search import Embedded

log = logging.getLogger(__name__)

#: Most batches one call of :meth:`EntryEmbedder.embed_namespace` embeds, so a namespace of
#: 100k unembedded entries (a model change) holds its task for a bounded time; the rest follow
#: at its next commit or through :meth:`EntryEmbedder.embed_all`.
MAX_BATCHES_PER_CALL: Final = 16


def to_bytes(vector: Sequence[float]) -> bytes:
    """A vector as the float32 bytes the store keeps."""
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """Stored vectors as one ``(len(blobs), dim)`` float32 matrix."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)


@dataclass
class EntryEmbedder:
    """Embeds a namespace's unembedded active entries with ``embeddings`` (named ``model``)."""

    store: MemoryStore
    embeddings: Embeddings
    model: str
    #: The deadline of one whole :meth:`embed_namespace` (or :meth:`embed_texts` call without
    #: its own deadline), and of one query's embedding: a total, not a deadline per request.
    timeout_seconds: float = 30.0
    #: A test's injected time; without it the database's (one authority for SQL-side times).
    clock: Callable[[], datetime] | None = None
    #: Seconds between attempts grow from this (tests pass 0).
    retry_wait_seconds: float = 0.5
    #: The model's dimension, learned from its first usable vectors: a vector of another
    #: length is refused (it could be neither stored beside the others nor compared to them).
    dim: int | None = field(default=None, init=False)

    def deadline(self) -> float:
        """A deadline (:func:`time.monotonic` value) ``timeout_seconds`` from now."""
        return time.monotonic() + self.timeout_seconds

    def embed_texts(
        self, texts: Sequence[str], deadline: float | None = None
    ) -> list[Vector | None]:
        """One checked vector or ``None`` per text (:func:`embed_within`), all before
        ``deadline`` (default: ``timeout_seconds`` from now); never raises for the model."""
        found = embed_within(
            self.embeddings,
            texts,
            self.deadline() if deadline is None else deadline,
            dim=self.dim,
            retry_wait_seconds=self.retry_wait_seconds,
            label=f"embedding model {self.model}",
        )
        if self.dim is None:
            self.dim = next((int(v.shape[0]) for v in found if v is not None), None)
        return found

    def embed_query(self, text: str) -> np.ndarray:
        """The query's checked vector: one attempt within ``timeout_seconds`` (an agent is
        waiting; search falls back to full text), else :class:`ModelUnavailable` — also for a
        vector that is not finite, of length zero or of another dimension than the model's."""
        try:
            raw = within(lambda: self.embeddings.embed_query(text), self.deadline())
        except DeadlinePassed:
            raise ModelUnavailable(
                f"embedding model {self.model} did not answer within {self.timeout_seconds:g} s"
            ) from None
        except Exception as exc:
            raise ModelUnavailable(
                f"embedding model {self.model} failed: {type(exc).__name__}: {exc}"
            ) from exc
        vector = usable_vector(raw, dim=self.dim)
        if vector is None:
            raise ModelUnavailable(
                f"embedding model {self.model} returned an unusable query vector (not finite, "
                f"of length zero, or not {self.dim or 'the stored'} values)"
            )
        return vector

    def embed_namespace(self, namespace: str) -> int:
        """Embed up to ``EMBED_BATCH * MAX_BATCHES_PER_CALL`` unembedded entries of
        ``namespace`` within ``timeout_seconds`` in all; returns how many vectors were stored.
        Never raises (see the module)."""
        stored = 0
        deadline = self.deadline()
        try:
            for _ in range(MAX_BATCHES_PER_CALL):
                pending = self.store.pending_embeddings(namespace, self.model, limit=EMBED_BATCH)
                if not pending:
                    break
                vectors = self.embed_texts([p.text for p in pending], deadline)
                items = [
                    Embedded(p.entry_id, p.text, v.tobytes(), int(v.shape[0]))
                    for p, v in zip(pending, vectors, strict=True)
                    if v is not None
                ]
                wrote = (
                    self.store.store_embeddings(
                        namespace,
                        self.model,
                        items,
                        now=self.clock() if self.clock is not None else self.store.db_now(),
                    )
                    if items
                    else 0
                )
                stored += wrote
                if wrote < len(pending):
                    # A vector refused or missing (they wait for the next commit), or entries
                    # changed meanwhile (the next commit embeds their new text).
                    break
        except MemworkerError as exc:
            log.warning("embedding entries of %s stopped, they wait: %s", namespace, exc)
        except Exception:
            log.exception("embedding entries of %s failed, they wait", namespace)
        return stored

    def embed_all(self, namespaces: Iterable[str]) -> int:
        """:meth:`embed_namespace` for each of ``namespaces`` until each has no unembedded
        entry left (a model change's backfill); vectors stored."""
        total = 0
        for namespace in namespaces:
            while (wrote := self.embed_namespace(namespace)) > 0:
                total += wrote
        return total

    def close(self) -> None:
        """Nothing to release (calls run on daemon threads); kept for the runtime's close."""


#: The full-text bonus as a share of the query's spread (its best cosine minus the median
#: cosine of the namespace), not in absolute cosine: a multilingual model's cosines of short
#: entries crowd into a band a few hundredths wide, so a fixed bonus let any full-text hit
#: jump to first place. Chosen for first place at least as often as the cosine alone, then
#: the best LoCoMo recall@10; 0.15 and 0.2 are within noise of each other.
LEXICAL_WEIGHT: Final = 0.2
#: Full-text hits that receive the bonus, all the same: within them the full-text order is
#: not trusted beyond "these match" (the index drops English stopwords only, so on a German
#: or French paraphrase its first hit may share only "ich habe" with the question), and the
#: cosine orders them. Deeper than a dozen, LoCoMo's recall@10 falls.
LEXICAL_DEPTH: Final = 12
#: An entry found by its words but not embedded yet (its vector follows its commit by
#: seconds) has no cosine: it scores the namespace's median cosine plus this over its
#: full-text rank, so a fact the user has just stated ranks first when the query names it.
UNEMBEDDED_BONUS: Final = 0.1
#: Namespaces whose vector matrices one search object keeps (a conversation searches its
#: user's namespace again and again); 16 x 10k entries x 384 floats is about 250 MB at worst.
MATRIX_CACHE_SIZE: Final = 16
#: Hits after the first that are re-ordered by what they are about (:func:`by_kinds`), and the
#: weight of that: each gets this times how alike its attribute profile and the query's are
#: (:meth:`~worker.consolidation.meaning.Meaning.profiles`, from -1 to 1) on top of its fused
#: score. A question rarely shares words with its answer ("What pet do I have?" for "I've got
#: a tabby called Miso"), and a small multilingual model's cosine ranks a job or a
#: neighbour's dog as near; the kinds of statement the consolidator learned tell the user's
#: pets apart from those. The first hit stays first: there the cosine and the words are
#: surest. Chosen by the best mean reciprocal rank among settings that keep first place and
#: LoCoMo's recall@10 (deeper than 10 costs LoCoMo).
KIND_DEPTH: Final = 10
KIND_WEIGHT: Final = 0.3


class Fusion(TypedDict, total=False):
    """:func:`fuse_scores`'s options beside its data (each defaults to the shipped value)."""

    weight: float
    depth: int
    fresh: float
    rows: Mapping[str, int] | None


def fuse_scores(
    cosines: np.ndarray,
    ids: Sequence[str],
    lexical: Sequence[str],
    limit: int,
    **options: Unpack[Fusion],
) -> list[str]:
    """The best ``limit`` ids by cosine (``cosines[i]`` is ``ids[i]``'s), each of the first
    ``depth`` ids of ``lexical`` lifted by the same bonus, ``weight`` times the query's spread
    (its best cosine minus the median cosine, never below zero). An id of ``lexical`` without
    a cosine gets the median cosine (the neutral value: a word match not embedded yet ranks
    among the average entries) plus ``fresh / rank`` (its full-text rank, from 1). Ties: the
    cosine's order, then the lexical order. ``rows``, when given, is each id's index in
    ``ids`` (a caller that keeps ``ids`` keeps it too).

    >>> fuse_scores(np.array([0.9, 0.88, 0.5, 0.4]), ["a", "b", "c", "e"], ["b"], 3)
    ['b', 'a', 'c']
    >>> fuse_scores(np.array([0.9, 0.85, 0.5]), ["a", "b", "c"], ["c", "d"], 3)
    ['a', 'd', 'b']
    """
    return [item for _, item in fused_hits(cosines, ids, lexical, limit, **options)]


def fused_hits(
    cosines: np.ndarray,
    ids: Sequence[str],
    lexical: Sequence[str],
    limit: int,
    *,
    weight: float = LEXICAL_WEIGHT,
    depth: int = LEXICAL_DEPTH,
    fresh: float = UNEMBEDDED_BONUS,
    rows: Mapping[str, int] | None = None,
) -> list[tuple[float, str]]:
    """:func:`fuse_scores`'s ranking with each id's fused score, best first."""
    if limit < 1:
        return []
    scores = cosines.astype(np.float64)
    floor = float(np.median(scores)) if scores.shape[0] else 0.0
    top = float(scores.max()) if scores.shape[0] else floor
    bonus = weight * max(0.0, top - floor)
    row_of = rows if rows is not None else {item: i for i, item in enumerate(ids)}
    unembedded: list[tuple[float, str]] = []
    for n, item in enumerate(lexical):
        row = row_of.get(item)
        if row is None:
            unembedded.append((floor + fresh / (n + 1), item))
        elif n < depth:
            scores[row] += bonus
    best = _top_rows(scores, limit)
    merged = [(float(scores[i]), 0, n, ids[i]) for n, i in enumerate(best)]
    merged += [(score, 1, n, item) for n, (score, item) in enumerate(unembedded)]
    merged.sort(key=lambda m: (-m[0], m[1], m[2]))
    return [(m[0], m[3]) for m in merged[:limit]]


def _top_rows(scores: np.ndarray, limit: int) -> list[int]:
    """Indices of the ``limit`` highest ``scores``, highest first (ties: lower index first)."""
    limit = min(limit, scores.shape[0])
    if limit < 1:
        return []
    top = np.argpartition(-scores, limit - 1)[:limit]
    return [int(i) for i in top[np.lexsort((top, -scores[top]))]]


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with each row scaled to length one (cosine is then a dot product)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def _usable_rows(entry_ids: list[str], matrix: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The rows fit to rank with (finite, non-zero length) and their ids: a vector stored
    before vectors were checked, or written by hand, is left out (its entry is still found by
    its words) instead of turning every ranking it takes part in into noise."""
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.linalg.norm(matrix.astype(np.float64), axis=1)
    good = np.isfinite(matrix).all(axis=1) & np.isfinite(norms) & (norms > 0)
    if bool(good.all()):
        return entry_ids, matrix
    log.warning("%d stored vector(s) unusable (not finite or length zero); left out", (~good).sum())
    return [i for i, ok in zip(entry_ids, good, strict=True) if ok], matrix[good]


@dataclass(frozen=True)
class _Matrix:
    """One namespace's vectors: entry ids, each id's row, and the unit-row matrix."""

    entry_ids: list[str]
    rows: dict[str, int]
    unit_rows: np.ndarray


class _MatrixCache:
    """The vectors of recently searched namespaces as matrices, re-read only when the store's
    fingerprint of them changed (one cheap query instead of every vector per search)."""

    def __init__(self, size: int = MATRIX_CACHE_SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], tuple[object, _Matrix]] = OrderedDict()

    def peek(self, namespace: str, model: str) -> tuple[object, _Matrix] | None:
        """The fingerprint ``namespace``'s matrix was read at and the matrix (no entry ids
        when it had no vectors), or None when none is kept; reads nothing."""
        with self._lock:
            return self._items.get((namespace, model))

    def get(
        self, store: MemoryStore, namespace: str, model: str, mark: object = None
    ) -> _Matrix | None:
        """``namespace``'s vectors from ``model``; None when it has none. ``mark`` is the
        store's fingerprint of them when the caller has just read it."""
        key = (namespace, model)
        if mark is None:
            mark = store.vectors_fingerprint(namespace, model)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == mark:
                self._items.move_to_end(key)
                return hit[1] if hit[1].entry_ids else None
        # Stale or absent: every vector is read again, in one snapshot with its fingerprint.
        stored = store.namespace_vectors(namespace, model)
        ids, rows = _usable_rows(stored.entry_ids, from_bytes(stored.vectors, stored.dim))
        found = _Matrix(ids, {i: n for n, i in enumerate(ids)}, _unit_rows(rows))
        with self._lock:
            self._items[key] = (stored.fingerprint, found)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return found if found.entry_ids else None


def _dense_ranking(
    matrix: _Matrix,
    unit: np.ndarray,
    lexical: Sequence[str],
    limit: int,
    meaning: Meaning | None = None,
) -> list[str]:
    """:func:`fuse_scores` over every row of ``matrix`` for the unit query vector ``unit``,
    its first hits re-ordered by what they are about (:func:`by_kinds`) when ``meaning`` is
    given."""
    # einsum, not ``@``: a matrix-vector product through BLAS spreads over every core and, on
    # a loaded machine, waits for them; this one runs on the calling thread.
    cosines = np.einsum("ij,j->i", matrix.unit_rows, unit)
    if meaning is None:
        return fuse_scores(cosines, matrix.entry_ids, lexical, limit, rows=matrix.rows)
    depth = max(limit, KIND_DEPTH)
    hits = fused_hits(cosines, matrix.entry_ids, lexical, depth, rows=matrix.rows)
    ranked = by_kinds(hits, matrix.rows, matrix.unit_rows, unit, meaning)
    return [item for _, item in ranked[:limit]]


def by_kinds(
    hits: Sequence[tuple[float, str]],
    rows: Mapping[str, int],
    vectors: np.ndarray,
    query: np.ndarray,
    meaning: Meaning,
) -> list[tuple[float, str]]:
    """``hits`` (fused score, id; best first) re-ordered by :func:`lift_by_kinds`, with how
    alike what each and the query are about (:meth:`~worker.consolidation.meaning.Meaning.profiles`
    of its row of ``vectors``, ``rows`` giving each id's, and of ``query``); a hit without a
    vector keeps its score. Unchanged while the kinds' examples have no vectors at hand
    (:meth:`~worker.consolidation.meaning.Meaning.kinds_known`: a model other than the shipped
    one, before its first merge): a query never waits for the model to embed them."""
    head = [item for _, item in hits[1:KIND_DEPTH] if item in rows]
    if not head or not meaning.kinds_known():
        return list(hits)
    profiles = meaning.profiles(np.vstack([query, vectors[[rows[item] for item in head]]]))
    alike = dict(zip(head, (profiles[1:] @ profiles[0]).tolist(), strict=True))
    return lift_by_kinds(hits, alike)


def lift_by_kinds(
    hits: Sequence[tuple[float, str]],
    alike: Mapping[str, float],
    *,
    weight: float = KIND_WEIGHT,
    depth: int = KIND_DEPTH,
) -> list[tuple[float, str]]:
    """``hits`` (fused score, id; best first) with the ``depth`` - 1 after the first
    re-ordered by their score plus ``weight`` times ``alike[id]`` (how alike what the hit and
    the query are about, from -1 to 1; 0 when absent). The first hit and those past ``depth``
    keep their places; ties keep the fused order.

    >>> hits = [(0.9, "a"), (0.8, "b"), (0.79, "c"), (0.7, "d")]
    >>> [item for _, item in lift_by_kinds(hits, {"c": 1.0, "d": 1.0}, depth=3)]
    ['a', 'c', 'b', 'd']
    """
    head = list(hits[1:depth])
    scored = [
        (score + weight * alike.get(item, 0.0), n, item) for n, (score, item) in enumerate(head)
    ]
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [*hits[:1], *((score, item) for score, _, item in scored), *hits[depth:]]


def _model_vector(embedder: EntryEmbedder, query: str) -> np.ndarray | None:
    """The model's vector of ``query``; None for a blank query or a model that fails (or
    hangs past its deadline)."""
    if not query.strip():
        return None
    try:
        return embedder.embed_query(query)
    except MemworkerError as exc:
        log.warning("query embedding failed, searching full text only: %s", exc)
        return None


def _unit(model: str, vector: np.ndarray, matrix: _Matrix) -> np.ndarray | None:
    """``vector`` scaled to length one; None (full text only) when it is unfit to rank with
    (:func:`~worker.consolidation.meaning.usable_vector`: a value that is not finite, length
    zero) or its size is not that of ``matrix``'s rows. A NaN let through would make every
    cosine NaN and the ranking noise."""
    dim = matrix.unit_rows.shape[1]
    checked = usable_vector(vector, dim=dim)
    if checked is None:
        log.warning(
            "embedding model %s returned an unusable query vector (%s values, stored vectors "
            "have %d; or a value that is not finite, or length zero); full text only",
            model,
            vector.shape,
            dim,
        )
        return None
    unit: np.ndarray = (checked / float(np.linalg.norm(checked.astype(np.float64)))).astype(
        np.float32
    )
    return unit


class SqlMemorySearch:
    """:class:`~worker.integrations.deepagents.MemorySearch` over the SQL memory store,
    hybrid when an :class:`~worker.service.search.EntryEmbedder` is given."""

    supports_search = True

    def __init__(
        self,
        store: MemoryStore,
        embedder: EntryEmbedder | None = None,
        meaning: Meaning | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        #: What re-orders the hybrid ranking's first hits by kinds of statement (None: the
        #: fused order as it is).
        self.meaning = meaning
        self._matrices = _MatrixCache()

    def search(self, namespace: str, query: str, *, limit: int) -> Sequence[MemoryHit]:
        return [MemoryHit(e.path, e.text) for e in self.search_entries(namespace, query, limit)]

    def search_entries(self, namespace: str, query: str, limit: int) -> list[Entry]:
        """The best ``limit`` active entries of ``namespace`` for ``query``, best first.

        Hybrid, with the namespace's matrix kept (it had vectors): the query is embedded
        first, outside any transaction, then ranked and its entries read back in the
        full-text query's own snapshot, provided the kept matrix is that snapshot's (same
        fingerprint). Otherwise (the first query of a namespace, or one after a change of it)
        the matrix is read again, the query embedded if it was not, and the ranked entries
        read back in a transaction of their own. The model is asked at most once per query,
        and never for a namespace known to have no vectors."""
        if limit < 1:
            return []
        if self.embedder is None:
            return self.store.search_entries(namespace, query, limit=limit)
        embedder = self.embedder
        depth = max(limit, LEXICAL_DEPTH)
        kept = self._matrices.peek(namespace, embedder.model)
        asked = kept is not None and bool(kept[1].entry_ids)
        vector = _model_vector(embedder, query) if asked else None

        def choose(mark: tuple[int, int], lexical: list[str]) -> list[str] | None:
            if kept is None or mark != kept[0]:
                return None  # not the kept matrix's snapshot: ranked below, after a re-read
            unit = None if vector is None else _unit(embedder.model, vector, kept[1])
            if unit is None:
                return lexical[:limit]
            return _dense_ranking(kept[1], unit, lexical, limit, self.meaning)

        found = self.store.search_and_read(namespace, query, limit=depth, choose=choose)
        if found.entries is not None:
            return found.entries
        lexical = found.entry_ids
        ranked = lexical[:limit]  # full text alone, unless the vectors below rank them
        matrix = None
        if query.strip():
            matrix = self._matrices.get(self.store, namespace, embedder.model, found.fingerprint)
        if matrix is not None:
            if not asked:
                vector = _model_vector(embedder, query)
            unit = None if vector is None else _unit(embedder.model, vector, matrix)
            if unit is not None:
                ranked = _dense_ranking(matrix, unit, lexical, limit, self.meaning)
        return self.store.entries_by_id(namespace, ranked)

    def read(self, namespace: str, path: str) -> str | None:
        return self.store.current_files(namespace).get(path)
