"""The SQLite search index: FTS5 postings per namespace (see :mod:`worker.store.search`).

A namespace is a rowid range of ``search_fts`` (``namespace id << 32`` upward), which FTS5
seeks to inside its index: other namespaces cost nothing and are never returned. Each term is
looked up on its own, as one quoted FTS5 string (``"term"``, a ``"`` inside doubled), so
nothing a user types is read as FTS5 syntax; the ranking is computed by
:mod:`worker.store.search` (``bm25()`` would read every namespace's postings of a term
to weigh it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy.engine import Connection

from worker.errors import StoreRefused
from worker.store.search_text import DOCS, FTS, IndexText, QueryTerms

#: Bits of an id that number entries inside their namespace.
_SEQ_BITS: Final = 32
#: Rows per multi-row DELETE statement (below SQLite's bound-parameter limit).
_CHUNK: Final = 500


def _range(ns_id: int) -> tuple[int, int]:
    """The ids namespace ``ns_id`` owns (both ends included)."""
    low = ns_id << _SEQ_BITS
    return low, low + (1 << _SEQ_BITS) - 1


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def delete(conn: Connection, ns_id: int, entry_ids: Sequence[str]) -> list[int]:
    """Take ``entry_ids`` of namespace ``ns_id`` out of the index (absent ones are ignored);
    the lengths of the entries taken out."""
    lengths: list[int] = []
    for start in range(0, len(entry_ids), _CHUNK):
        chunk = list(entry_ids[start : start + _CHUNK])
        marks = ",".join("?" * len(chunk))
        gone = conn.exec_driver_sql(
            f"DELETE FROM {DOCS} WHERE namespace_id = ? AND entry_id IN ({marks}) "
            "RETURNING id, doc_len",
            (ns_id, *chunk),
        ).all()
        if gone:
            conn.exec_driver_sql(f"DELETE FROM {FTS} WHERE rowid = ?", [(r[0],) for r in gone])
            lengths.extend(int(r[1]) for r in gone)
    return lengths


def insert(conn: Connection, ns_id: int, rows: Sequence[tuple[str, IndexText]]) -> None:
    """Index ``rows`` (entry id, its index text) of namespace ``ns_id``; none may be indexed."""
    if not rows:
        return
    low, high = _range(ns_id)
    top = conn.exec_driver_sql(
        f"SELECT max(id) FROM {DOCS} WHERE id BETWEEN ? AND ?", (low, high)
    ).scalar()
    first = (low if top is None else int(top)) + 1
    if first + len(rows) > high:
        raise StoreRefused(
            f"the search index of namespace row {ns_id} has used its 2^32 ids; rebuild it "
            "(MemoryStore.rebuild_search)"
        )
    conn.exec_driver_sql(
        f"INSERT INTO {DOCS} (id, namespace_id, entry_id, doc_len, repeats) VALUES (?, ?, ?, ?, ?)",
        [
            (first + i, ns_id, entry_id, text.length, text.repeats)
            for i, (entry_id, text) in enumerate(rows)
        ],
    )
    conn.exec_driver_sql(
        f"INSERT INTO {FTS} (rowid, words, grams) VALUES (?, ?, ?)",
        [(first + i, text.words, text.grams) for i, (_, text) in enumerate(rows)],
    )


def drop_namespaces(conn: Connection, ns_ids: Sequence[int]) -> None:
    """Remove every indexed entry of ``ns_ids`` (erase)."""
    for ns_id in ns_ids:
        low, high = _range(ns_id)
        conn.exec_driver_sql(f"DELETE FROM {FTS} WHERE rowid BETWEEN ? AND ?", (low, high))
        conn.exec_driver_sql(f"DELETE FROM {DOCS} WHERE id BETWEEN ? AND ?", (low, high))


def clear(conn: Connection) -> None:
    """Empty the whole index (before a rebuild)."""
    conn.exec_driver_sql(f"DELETE FROM {FTS}")
    conn.exec_driver_sql(f"DELETE FROM {DOCS}")


def match_expression(term: str, *, gram: bool) -> str:
    """The FTS5 MATCH text finding one term in its column.

    >>> match_expression('x"y', gram=False), match_expression("北京", gram=True)
    ('words : "x""y"', 'grams : "北京"')
    """
    return ("grams" if gram else "words") + " : " + _quote(term)


def _postings(
    conn: Connection, ns_id: int, terms: QueryTerms, cap: int, low: int
) -> dict[str, list[int]]:
    high = _range(ns_id)[1]
    found: dict[str, list[int]] = {}
    for term, gram in [*((w, False) for w in terms.words), *((g, True) for g in terms.grams)]:
        rows = conn.exec_driver_sql(
            f"SELECT rowid FROM {FTS} WHERE {FTS} MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?",
            (match_expression(term, gram=gram), low, high, cap),
        ).all()  # one fetch of every row, not one call per row
        found[term] = [int(r[0]) for r in rows]
    return found


def postings(conn: Connection, ns_id: int, terms: QueryTerms, cap: int) -> dict[str, list[int]]:
    """Per term, ids of up to ``cap`` indexed entries of ``ns_id`` holding it."""
    return _postings(conn, ns_id, terms, cap, _range(ns_id)[0])


def window_postings(
    conn: Connection, ns_id: int, terms: QueryTerms, newest: int
) -> dict[str, list[int]]:
    """Per term, the ids among the ``newest`` most recent entries of ``ns_id`` holding it
    (the top of the namespace's rowid range, which FTS5 seeks to)."""
    low, high = _range(ns_id)
    start = conn.exec_driver_sql(
        f"SELECT id FROM {DOCS} WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT 1 OFFSET ?",
        (low, high, newest - 1),
    ).scalar()
    return _postings(conn, ns_id, terms, newest, low if start is None else int(start))
