"""The PostgreSQL search index: a GIN-indexed ``tsvector`` per entry.

An entry's vector is its words under the deployment's text-search configuration (stemmed,
weight A) plus the same words under ``simple`` (language-neutral, weight B: names, other
languages, words the stemmer mangles) plus its n-grams verbatim (``array_to_tsvector``). A
query term is the OR of its stemmed and its plain form (an n-gram: itself), found through the
GIN index one term at a time; ``ts_rank`` knows no document frequencies, so the ranking is
computed by :mod:`worker.store.search_rank` from these postings. Terms reach SQL as bound,
quoted lexemes: no query text is read as tsquery syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store.search_ddl import CONFIG, DOCS
from worker.store.search_text import IndexText, QueryTerms

_CONFIG: Final = f"CAST((SELECT config FROM {CONFIG}) AS regconfig)"

_INSERT: Final = sa.text(
    f"""INSERT INTO {DOCS} (namespace_id, entry_id, doc_len, repeats, tsv)
        VALUES (:ns, :entry_id, :doc_len, :repeats,
                setweight(to_tsvector({_CONFIG}, :words), 'A')
                || setweight(to_tsvector('simple', :words), 'B')
                || array_to_tsvector(CAST(:grams AS text[])))"""
)

#: One term's postings: its stemmed and plain forms (a word) or itself (an n-gram).
_WORD_QUERY: Final = f"(to_tsquery({_CONFIG}, :q{{i}}) || to_tsquery('simple', :q{{i}}))"
_GRAM_QUERY: Final = "CAST(:q{i} AS tsquery)"
#: Each term's tsquery, computed once per statement (inside a filter, ``to_tsquery`` with a
#: configuration read from a table would be re-parsed for every row).
_TERMS: Final = "WITH terms AS MATERIALIZED (SELECT * FROM (VALUES {rows}) AS t(i, tq))"
_TERM_POSTINGS: Final = (
    f"(SELECT {{i}} AS term, id FROM {DOCS} WHERE namespace_id = :ns "
    "AND tsv @@ (SELECT tq FROM terms WHERE i = {i}) LIMIT :cap)"
)
#: The newest entries of a namespace, read once through the ``(namespace_id, id)`` index:
#: every common term is then tested on these rows only (a GIN lookup of a term held by most
#: entries would visit all of them).
_WINDOW: Final = (
    f", win AS MATERIALIZED (SELECT id, tsv FROM {DOCS} WHERE namespace_id = :ns "
    "ORDER BY id DESC LIMIT :newest) "
    "SELECT t.i, w.id FROM win w JOIN terms t ON w.tsv @@ t.tq"
)


def _lexeme(term: str) -> str:
    """``term`` as one quoted tsquery operand (quotes doubled, backslashes escaped).

    >>> _lexeme("it's")
    "'it''s'"
    """
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def delete(conn: Connection, ns_id: int, entry_ids: Sequence[str]) -> list[int]:
    """Take ``entry_ids`` of namespace ``ns_id`` out of the index (absent ones are ignored);
    the lengths of the entries taken out."""
    if not entry_ids:
        return []
    rows = conn.execute(
        sa.text(
            f"DELETE FROM {DOCS} WHERE namespace_id = :ns AND entry_id = ANY(:ids) "
            "RETURNING doc_len"
        ),
        {"ns": ns_id, "ids": list(entry_ids)},
    ).scalars()
    return [int(n) for n in rows]


def insert(conn: Connection, ns_id: int, rows: Sequence[tuple[str, IndexText]]) -> None:
    """Index ``rows`` (entry id, its index text) of namespace ``ns_id``; none may be indexed."""
    if not rows:
        return
    params = [
        {
            "ns": ns_id,
            "entry_id": entry_id,
            "doc_len": text.length,
            "repeats": text.repeats,
            "words": text.words,
            "grams": list(dict.fromkeys(text.grams.split())),
        }
        for entry_id, text in rows
    ]
    conn.execute(_INSERT, params)


def drop_namespaces(conn: Connection, ns_ids: Sequence[int]) -> None:
    """Remove every indexed entry of ``ns_ids`` (erase)."""
    conn.execute(
        sa.text(f"DELETE FROM {DOCS} WHERE namespace_id = ANY(:ids)"), {"ids": list(ns_ids)}
    )


def clear(conn: Connection) -> None:
    """Empty the whole index (before a rebuild)."""
    conn.exec_driver_sql(f"DELETE FROM {DOCS}")


def configured(conn: Connection) -> str:
    """The text-search configuration the index is built with."""
    return str(conn.exec_driver_sql(f"SELECT config FROM {CONFIG}").scalar_one())


def set_config(conn: Connection, config: str) -> None:
    """Record ``config`` (the caller rebuilds the index); an unknown one raises."""
    conn.execute(sa.text("SELECT CAST(:c AS regconfig)"), {"c": config})
    conn.execute(sa.text(f"UPDATE {CONFIG} SET config = :c"), {"c": config})


def _listed(terms: QueryTerms) -> list[tuple[str, str]]:
    return [*((w, _WORD_QUERY) for w in terms.words), *((g, _GRAM_QUERY) for g in terms.grams)]


def _terms_cte(listed: list[tuple[str, str]]) -> str:
    return _TERMS.format(
        rows=", ".join(f"({i}, {query.format(i=i)})" for i, (_, query) in enumerate(listed))
    )


def _run(
    conn: Connection, sql: str, listed: list[tuple[str, str]], params: dict[str, object]
) -> dict[str, list[int]]:
    params = {**params, **{f"q{i}": _lexeme(term) for i, (term, _) in enumerate(listed)}}
    found: dict[str, list[int]] = {term: [] for term, _ in listed}
    # .all(): one fetch of every row; iterating the result fetches row by row (about 1,500
    # rows per query, a tenth of a 10k namespace's query time in a profile).
    for i, doc in conn.execute(sa.text(sql), params).all():
        found[listed[int(i)][0]].append(int(doc))
    return found


def postings(conn: Connection, ns_id: int, terms: QueryTerms, cap: int) -> dict[str, list[int]]:
    """Per term, ids of up to ``cap`` indexed entries of ``ns_id`` holding it: one
    statement, a GIN lookup per term."""
    listed = _listed(terms)
    if not listed:
        return {}
    parts = [_TERM_POSTINGS.format(i=i) for i in range(len(listed))]
    sql = _terms_cte(listed) + " " + " UNION ALL ".join(parts)
    return _run(conn, sql, listed, {"ns": ns_id, "cap": cap})


def window_postings(
    conn: Connection, ns_id: int, terms: QueryTerms, newest: int
) -> dict[str, list[int]]:
    """Per term, the ids among the ``newest`` most recent entries of ``ns_id`` holding it."""
    listed = _listed(terms)
    if not listed:
        return {}
    sql = _terms_cte(listed) + _WINDOW
    return _run(conn, sql, listed, {"ns": ns_id, "newest": newest})
