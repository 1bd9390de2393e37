"""The SQLite search index: FTS5 with BM25 ranking (see :mod:`worker.store.search_ddl`).

Every query is built from quoted terms only (``"term"``, a ``"`` inside doubled), so nothing a
user types is read as FTS5 syntax. It matches ``ns : "n<id>" AND ({words grams} : (t1 OR t2 …))``:
the namespace token is intersected inside the index, and the ``ns`` column weighs 0 in
``bm25()`` so it never moves a score. SQLite's ``bm25()`` takes its document frequencies over
the whole table (all namespaces): the ranking is BM25, the IDF global.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection

from worker.store.search_ddl import DOCS, FTS
from worker.store.search_text import IndexText, QueryTerms

#: Rows per multi-row DELETE/INSERT statement (below SQLite's bound-parameter limit).
_CHUNK = 500


def _ns_token(ns_id: int) -> str:
    return f"n{ns_id}"


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def delete(conn: Connection, ns_id: int, entry_ids: Sequence[str]) -> None:
    """Take ``entry_ids`` of namespace ``ns_id`` out of the index (absent ones are ignored)."""
    for start in range(0, len(entry_ids), _CHUNK):
        chunk = list(entry_ids[start : start + _CHUNK])
        marks = ",".join("?" * len(chunk))
        where = f"namespace_id = ? AND entry_id IN ({marks})"
        conn.exec_driver_sql(
            f"DELETE FROM {FTS} WHERE rowid IN (SELECT id FROM {DOCS} WHERE {where})",
            (ns_id, *chunk),
        )
        conn.exec_driver_sql(f"DELETE FROM {DOCS} WHERE {where}", (ns_id, *chunk))


def insert(conn: Connection, ns_id: int, rows: Sequence[tuple[str, IndexText]]) -> None:
    """Index ``rows`` (entry id, its index text) of namespace ``ns_id``; none may be indexed."""
    token = _ns_token(ns_id)
    for entry_id, text in rows:
        rowid = conn.exec_driver_sql(
            f"INSERT INTO {DOCS} (namespace_id, entry_id) VALUES (?, ?) RETURNING id",
            (ns_id, entry_id),
        ).scalar_one()
        conn.exec_driver_sql(
            f"INSERT INTO {FTS} (rowid, ns, words, grams) VALUES (?, ?, ?, ?)",
            (rowid, token, text.words, text.grams),
        )


def drop_namespaces(conn: Connection, ns_ids: Sequence[int]) -> None:
    """Remove every indexed entry of ``ns_ids`` (erase)."""
    for ns_id in ns_ids:
        conn.exec_driver_sql(
            f"DELETE FROM {FTS} WHERE rowid IN (SELECT id FROM {DOCS} WHERE namespace_id = ?)",
            (ns_id,),
        )
        conn.exec_driver_sql(f"DELETE FROM {DOCS} WHERE namespace_id = ?", (ns_id,))


def clear(conn: Connection) -> None:
    """Empty the whole index (before a rebuild)."""
    conn.exec_driver_sql(f"DELETE FROM {FTS}")
    conn.exec_driver_sql(f"DELETE FROM {DOCS}")


def match_expression(ns_id: int, terms: QueryTerms) -> str:
    """The FTS5 MATCH text for ``terms`` in namespace ``ns_id`` (terms quoted, OR-joined).

    >>> match_expression(7, QueryTerms(("tea", 'x"y'), ("北京",)))
    'ns : "n7" AND (words : ("tea" OR "x""y") OR grams : ("北京"))'
    """
    legs = []
    if terms.words:
        legs.append("words : (" + " OR ".join(map(_quote, terms.words)) + ")")
    if terms.grams:
        legs.append("grams : (" + " OR ".join(map(_quote, terms.grams)) + ")")
    return f"ns : {_quote(_ns_token(ns_id))} AND (" + " OR ".join(legs) + ")"


def search(conn: Connection, ns_id: int, terms: QueryTerms, limit: int) -> list[tuple[str, float]]:
    """``(entry id, score)`` of the best ``limit`` indexed entries, best first (higher is
    better: ``-bm25()``)."""
    rows = conn.exec_driver_sql(
        f"""SELECT d.entry_id, bm25({FTS}, 0.0, 1.0, 1.0) AS score
            FROM {FTS} JOIN {DOCS} d ON d.id = {FTS}.rowid
            WHERE {FTS} MATCH ? AND d.namespace_id = ?
            ORDER BY score, d.entry_id LIMIT ?""",
        (match_expression(ns_id, terms), ns_id, limit),
    )
    return [(str(r[0]), -float(r[1])) for r in rows]
