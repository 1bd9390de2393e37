"""Search a namespace's committed entries: the backend of the ``search_memory`` tool.

Full text first: the store's index (FTS5 or PostgreSQL full text, BM25-ranked; see
:mod:`worker.store.search_index`) over every active entry of the namespace, whichever file it
is in, kept by the commit itself, so a search never sees a half-commit, a superseded entry, an
erased one or another namespace's. With embeddings configured, the query's vector is compared
(cosine, brute force with numpy) with the namespace's stored vectors, and the two rankings are
fused by reciprocal rank (``1 / (RRF_K + rank)`` summed over both lists): an entry found by
either list is kept, one found by both rises. Entries not embedded yet are found by their
words; a namespace without vectors, or a model that fails or hangs, gives the full-text
ranking alone.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

import numpy as np

from worker.errors import MemworkerError
from worker.service.embed import EntryEmbedder, from_bytes
from worker.store.memory import MemoryStore
from worker.values import Entry, MemoryHit

log = logging.getLogger(__name__)

#: Reciprocal-rank-fusion constant: 60 is the usual value (Cormack et al. 2009); a large k
#: lets the lower ranks of each list still count, so neither ranking dominates.
RRF_K: Final = 60
#: Candidates each list contributes to the fusion, as a multiple of the hits asked for.
CANDIDATES_PER_HIT: Final = 4
#: At least this many candidates per list, however few hits are asked for (LoCoMo recall@10
#: of the fusion: 83.8% with 40-deep lists, 83.4% with 50).
MIN_CANDIDATES: Final = 20
#: Namespaces whose vector matrices one search object keeps (a conversation searches its
#: user's namespace again and again); 16 x 10k entries x 384 floats is about 250 MB at worst.
MATRIX_CACHE_SIZE: Final = 16


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Ids ordered by their summed ``1 / (k + rank)`` over ``rankings`` (rank from 1); ties
    keep the order in which ids were first seen.

    >>> reciprocal_rank_fusion([["a", "b", "c"], ["c", "d"]])
    ['c', 'a', 'b', 'd']
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores, key=lambda item: (-scores[item], order[item]))


def cosine_top(query: np.ndarray, unit_rows: np.ndarray, limit: int) -> list[int]:
    """Row indices of ``unit_rows`` (rows of length one) most similar (cosine) to ``query``,
    best first.

    >>> cosine_top(np.array([1.0, 0.0]), np.array([[0.0, 1.0], [0.6, 0.8], [1.0, 0.0]]), 2)
    [2, 1]
    """
    if unit_rows.shape[0] == 0 or limit < 1:
        return []
    scores = unit_rows @ (query / max(float(np.linalg.norm(query)), 1e-12))
    limit = min(limit, scores.shape[0])
    top = np.argpartition(-scores, limit - 1)[:limit]
    return [int(i) for i in top[np.argsort(-scores[top], kind="stable")]]


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with each row scaled to length one (cosine is then a dot product)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


class _MatrixCache:
    """The vectors of recently searched namespaces as matrices, re-read only when the store's
    fingerprint of them changed (one cheap query instead of every vector per search)."""

    def __init__(self, size: int = MATRIX_CACHE_SIZE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], tuple[object, list[str], np.ndarray]] = (
            OrderedDict()
        )

    def get(
        self, store: MemoryStore, namespace: str, model: str
    ) -> tuple[list[str], np.ndarray] | None:
        """(entry ids, matrix) of ``namespace``'s vectors from ``model``; None when none."""
        key = (namespace, model)
        mark = store.vectors_fingerprint(namespace, model)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == mark:
                self._items.move_to_end(key)
                return (hit[1], hit[2]) if hit[1] else None
        stored = store.namespace_vectors(namespace, model)
        matrix = _unit_rows(from_bytes(stored.vectors, stored.dim))
        with self._lock:
            self._items[key] = (stored.fingerprint, stored.entry_ids, matrix)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return (stored.entry_ids, matrix) if stored.entry_ids else None


class SqlMemorySearch:
    """:class:`~worker.integrations.search_tools.MemorySearch` over the SQL memory store,
    hybrid when an :class:`~worker.service.embed.EntryEmbedder` is given."""

    supports_search = True

    def __init__(self, store: MemoryStore, embedder: EntryEmbedder | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self._matrices = _MatrixCache()

    def search(self, namespace: str, query: str, *, limit: int) -> Sequence[MemoryHit]:
        return [MemoryHit(e.path, e.text) for e in self.search_entries(namespace, query, limit)]

    def search_entries(self, namespace: str, query: str, limit: int) -> list[Entry]:
        """The best ``limit`` active entries of ``namespace`` for ``query``, best first."""
        if limit < 1:
            return []
        if self.embedder is None:
            return self.store.search_entries(namespace, query, limit=limit)
        pool = max(MIN_CANDIDATES, CANDIDATES_PER_HIT * limit)
        lexical = self.store.search_entries(namespace, query, limit=pool)
        dense = self._dense(self.embedder, namespace, query, pool)
        if not dense:
            return lexical[:limit]
        fused = reciprocal_rank_fusion([[e.id for e in lexical], dense])[:limit]
        known = {e.id: e for e in lexical}
        missing = [i for i in fused if i not in known]
        known.update({e.id: e for e in self.store.entries_by_id(namespace, missing)})
        return [known[i] for i in fused if i in known]

    def _dense(self, embedder: EntryEmbedder, namespace: str, query: str, pool: int) -> list[str]:
        """Entry ids by cosine similarity to ``query``; empty without vectors or a model."""
        if not query.strip():
            return []
        cached = self._matrices.get(self.store, namespace, embedder.model)
        if cached is None:
            return []
        entry_ids, matrix = cached
        try:
            vector = embedder.embed_query(query)
        except MemworkerError as exc:
            log.warning("query embedding failed, searching full text only: %s", exc)
            return []
        if vector.shape != (matrix.shape[1],):
            log.warning(
                "embedding model %s returned %s values, stored vectors have %d; full text only",
                embedder.model,
                vector.shape,
                matrix.shape[1],
            )
            return []
        return [entry_ids[i] for i in cosine_top(vector, matrix, pool)]

    def read(self, namespace: str, path: str) -> str | None:
        return self.store.current_files(namespace).get(path)
