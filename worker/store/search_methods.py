"""The memory store's search methods: full-text search, vectors, the index's configuration.

A mixin of :class:`~worker.store.memory.MemoryStore` (kept apart so the facade stays one
screen per concern); each method is one transaction of the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.models import Namespace
from worker.store import fence
from worker.store import search_index
from worker.store import vectors as _vectors
from worker.store.schema import entries
from worker.store.search_text import query_terms
from worker.store.snapshot import entry_from_row
from worker.store.vectors import Embedded, PendingText
from worker.values import Entry

T = TypeVar("T")


@dataclass(frozen=True)
class NamespaceVectors:
    """The vectors of a namespace's active entries from one model (rows of ``vectors``)."""

    entry_ids: list[str]
    vectors: list[bytes]
    dim: int
    #: Changes whenever the namespace's vectors may have (see :meth:`vectors_fingerprint`).
    fingerprint: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class SearchRead:
    """What :meth:`SearchMethods.search_and_read` read in one snapshot: the namespace's
    vector fingerprint, the full-text ids best first, and the active entries among those
    its ``choose`` picked (None when it picked none)."""

    fingerprint: tuple[int, int]
    entry_ids: list[str]
    entries: list[Entry] | None


class SearchMethods:
    """Search over the store (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    def _snapshot_read(self, what: str, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    def _write(self, what: str, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    def search_entries(self, namespace: str, query: str, *, limit: int) -> list[Entry]:
        """The best ``limit`` active entries of ``namespace`` for ``query`` (full-text, BM25),
        best first. Any text is a valid query: it is cut into terms, never read as syntax."""
        Namespace.parse(namespace)
        terms = query_terms(query)

        def run(conn: Connection) -> list[Entry]:
            at = search_index.head(conn, namespace)
            if at is None or not terms:
                return []
            ranked = [i for i, _ in search_index.search(conn, at, terms, limit)]
            return _active(conn, at.ns_id, ranked)

        return self._snapshot_read("searching " + namespace, run)

    def search_and_read(
        self,
        namespace: str,
        query: str,
        *,
        limit: int,
        choose: Callable[[tuple[int, int], list[str]], Sequence[str] | None],
    ) -> SearchRead:
        """:meth:`vectors_fingerprint` and the ids of :meth:`search_entries`' entries, best
        first, read in one snapshot; then, in the same snapshot, the active entries of
        ``namespace`` among the ids ``choose(fingerprint, ids)`` returns, in its order (None:
        none are read). A hybrid search ranks in ``choose`` when the vectors it keeps are
        those of this fingerprint: one transaction per query instead of two, and what it
        returns is checked active in the snapshot it was ranked in. ``choose`` runs inside
        the transaction: it must be quick and must not use the store."""
        Namespace.parse(namespace)
        terms = query_terms(query)

        def run(conn: Connection) -> SearchRead:
            at = search_index.head(conn, namespace)
            if at is None:
                chosen = choose((0, 0), [])
                return SearchRead((0, 0), [], None if chosen is None else [])
            found = search_index.search(conn, at, terms, limit) if terms else []
            ids = [i for i, _ in found]
            chosen = choose(at.fingerprint, ids)
            read = None if chosen is None else _active(conn, at.ns_id, chosen)
            return SearchRead(at.fingerprint, ids, read)

        return self._snapshot_read("searching " + namespace, run)

    def entries_by_id(self, namespace: str, entry_ids: Sequence[str]) -> list[Entry]:
        """The active entries of ``namespace`` among ``entry_ids``, in the order given."""
        ids = list(entry_ids)

        def run(conn: Connection) -> list[Entry]:
            ns_id = fence.namespace_id(conn, namespace)
            return [] if ns_id is None else _active(conn, ns_id, ids)

        return self._read("reading entries", run)

    def pending_embeddings(self, namespace: str, model: str, *, limit: int) -> list[PendingText]:
        """Active entries of ``namespace`` with no vector from ``model`` yet."""

        def run(conn: Connection) -> list[PendingText]:
            ns_id = fence.namespace_id(conn, namespace)
            return [] if ns_id is None else _vectors.pending(conn, ns_id, model, limit)

        return self._read("finding entries to embed", run)

    def store_embeddings(
        self, namespace: str, model: str, items: Sequence[Embedded], *, now: datetime
    ) -> int:
        """Store vectors of entries still active with the text embedded; how many were."""

        def run(conn: Connection) -> int:
            ns_id = fence.namespace_id(conn, namespace)
            if ns_id is None or not items:
                return 0
            return _vectors.store(conn, ns_id, model, items, now=now)

        return self._write("storing vectors", run)

    def namespace_vectors(self, namespace: str, model: str) -> NamespaceVectors:
        """The vectors from ``model`` of the active entries of ``namespace``."""

        def run(conn: Connection) -> NamespaceVectors:
            at = search_index.head(conn, namespace)
            if at is None:
                return NamespaceVectors([], [], 0)
            vectors = _vectors.active_vectors(conn, at.ns_id, model)
            return NamespaceVectors(*vectors, at.fingerprint)

        return self._snapshot_read("reading vectors", run)

    def vectors_fingerprint(self, namespace: str, model: str) -> tuple[int, int]:
        """A value that changes whenever the vectors :meth:`namespace_vectors` would return
        may have (the namespace's version, which every commit moves, and its vector counter,
        which every change of its vectors moves): one indexed read, so a caller can keep the
        matrix between queries."""
        del model  # one counter for all models: a change of any moves it

        def run(conn: Connection) -> tuple[int, int]:
            at = search_index.head(conn, namespace)
            return (0, 0) if at is None else at.fingerprint

        return self._read("reading vectors", run)

    def configure_search(self, config: str) -> bool:
        """Use PostgreSQL text-search configuration ``config``, rebuilding the index if it was
        built with another (True then); SQLite: nothing to do."""
        return self._write("configuring search", lambda c: search_index.configure(c, config))

    def rebuild_search(self) -> int:
        """Rebuild the whole search index from the active entries; entries indexed."""
        return self._write("rebuilding the search index", search_index.rebuild)


#: PostgreSQL's read back: the ids bound as one array, so the statement is the same whatever
#: their number (an expanded ``IN`` list is rendered parameter by parameter for every query,
#: and is a new statement for the driver at each count: half the read's client time).
_ACTIVE_PG = sa.select(entries).where(
    entries.c.namespace_id == sa.bindparam("ns"),
    entries.c.id == sa.any_(sa.bindparam("ids", type_=sa.ARRAY(entries.c.id.type))),
)


def _active(conn: Connection, ns_id: int, entry_ids: Sequence[str]) -> list[Entry]:
    """The active entries of ``ns_id`` among ``entry_ids``, in that order (the index only
    holds active entries; reading them back through ``entries`` checks it again)."""
    if not entry_ids:
        return []
    if conn.dialect.name == "postgresql":
        rows = conn.execute(_ACTIVE_PG, {"ns": ns_id, "ids": list(entry_ids)}).all()
    else:
        rows = conn.execute(
            sa.select(entries).where(
                entries.c.namespace_id == ns_id, entries.c.id.in_(list(entry_ids))
            )
        ).all()
    # Activity is checked here, not in SQL: with ``invalid_at IS NULL`` in the WHERE clause,
    # SQLite's planner walks the (namespace, invalid_at) index, every active entry, instead
    # of looking the few ids up by primary key.
    found = {r.id: entry_from_row(r) for r in rows if r.invalid_at is None}
    return [found[i] for i in entry_ids if i in found]
