"""The full-text index of active entries, kept by the same transactions that write entries.

Every write of ``entries`` (a commit, a rollback, an import, an erase) calls one of the
functions here inside its own transaction, so the index can never show a half-commit, a
superseded entry or an erased one: it holds exactly the active entries, and a search joins
back to ``entries`` (active, same namespace) besides. The backends are
:mod:`~worker.store.search_sqlite` (FTS5, ``bm25()``) and :mod:`~worker.store.search_postgres`
(``tsvector`` + GIN, BM25 from per-namespace statistics); the text both index is
:mod:`~worker.store.search_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import ConfigurationError
from worker.store import search_postgres, search_sqlite, vectors
from worker.store.schema import entries, namespaces
from worker.store.search_text import QueryTerms, index_text

#: Entry ids per ``IN (…)`` list when syncing (below SQLite's bound-parameter limit).
SYNC_CHUNK = 500
#: Entries read per round trip while rebuilding the whole index.
REBUILD_CHUNK = 2000


def _backend(conn: Connection) -> ModuleType:
    return search_postgres if conn.dialect.name == "postgresql" else search_sqlite


def sync_entries(conn: Connection, ns_id: int, entry_ids: Iterable[str]) -> None:
    """Make the index agree with ``entries`` for ``entry_ids`` of namespace ``ns_id``: each is
    indexed (with its current text) if active, and not indexed otherwise; a vector of an entry
    retired or rewritten goes too."""
    ids = list(dict.fromkeys(entry_ids))
    backend = _backend(conn)
    for start in range(0, len(ids), SYNC_CHUNK):
        chunk = ids[start : start + SYNC_CHUNK]
        backend.delete(conn, ns_id, chunk)
        active = conn.execute(
            sa.select(entries.c.id, entries.c.text).where(
                entries.c.namespace_id == ns_id,
                entries.c.id.in_(chunk),
                entries.c.invalid_at.is_(None),
            )
        ).all()
        backend.insert(conn, ns_id, [(r.id, index_text(r.text)) for r in active])
        vectors.discard(conn, ns_id, {r.id: r.text for r in active}, chunk)


def sync_path(conn: Connection, ns_id: int, path: str) -> None:
    """:func:`sync_entries` for every entry of one file (a rollback flips many at once)."""
    ids = conn.execute(
        sa.select(entries.c.id).where(entries.c.namespace_id == ns_id, entries.c.path == path)
    ).scalars()
    sync_entries(conn, ns_id, list(ids))


def sync_namespace(conn: Connection, ns_id: int) -> None:
    """Index every active entry of a namespace from scratch (an import, a rebuild)."""
    _backend(conn).drop_namespaces(conn, [ns_id])
    ids = conn.execute(
        sa.select(entries.c.id).where(
            entries.c.namespace_id == ns_id, entries.c.invalid_at.is_(None)
        )
    ).scalars()
    sync_entries(conn, ns_id, list(ids))


def drop_namespaces(conn: Connection, ns_ids: Sequence[int]) -> None:
    """Take every entry of ``ns_ids`` out of the index (erase, before the entries go)."""
    if ns_ids:
        _backend(conn).drop_namespaces(conn, list(ns_ids))


def rebuild(conn: Connection) -> int:
    """Rebuild the whole index from the active entries (the migration's backfill, a change of
    text-search configuration); returns the number of entries indexed."""
    backend = _backend(conn)
    backend.clear(conn)
    indexed = 0
    for ns_id in list(conn.execute(sa.select(namespaces.c.id)).scalars()):
        last = ""
        while True:
            rows = conn.execute(
                sa.select(entries.c.id, entries.c.text)
                .where(
                    entries.c.namespace_id == ns_id,
                    entries.c.invalid_at.is_(None),
                    entries.c.id > last,
                )
                .order_by(entries.c.id)
                .limit(REBUILD_CHUNK)
            ).all()
            if not rows:
                break
            backend.insert(conn, ns_id, [(r.id, index_text(r.text)) for r in rows])
            indexed += len(rows)
            last = rows[-1].id
    return indexed


def configure(conn: Connection, config: str) -> bool:
    """Build the PostgreSQL index with text-search configuration ``config`` (rebuilding it when
    it was built with another); True when it rebuilt. SQLite has one tokenizer: a no-op."""
    if conn.dialect.name != "postgresql" or search_postgres.configured(conn) == config:
        return False
    try:
        with conn.begin_nested():
            search_postgres.set_config(conn, config)
    except sa.exc.DBAPIError:
        raise ConfigurationError(
            f"text-search configuration {config!r} does not exist in this PostgreSQL "
            "database; use one `SELECT cfgname FROM pg_ts_config` lists (e.g. 'english', "
            "'simple')"
        ) from None
    rebuild(conn)
    return True


def one_snapshot(conn: Connection) -> None:
    """Make the rest of this read transaction see one snapshot. PostgreSQL's default (read
    committed) gives each statement its own: an id the index returned could belong to an entry
    a commit retired before the next statement read it. SQLite transactions are snapshots
    already. Call it first in the transaction."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")


def search(conn: Connection, ns_id: int, terms: QueryTerms, limit: int) -> list[tuple[str, float]]:
    """``(entry id, score)`` of the best ``limit`` active entries of ``ns_id`` for ``terms``,
    best first; empty when ``terms`` is."""
    if not terms or limit < 1:
        return []
    return list(_backend(conn).search(conn, ns_id, terms, limit))
