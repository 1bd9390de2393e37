"""The PostgreSQL search index: a GIN-indexed ``tsvector`` per entry.

An entry's vector is its words under the deployment's text-search configuration (stemmed,
weight A) plus the same words under ``simple`` (language-neutral, weight B: names, other
languages, words the stemmer mangles) plus its n-grams verbatim (``array_to_tsvector``). A
query term is the OR of its stemmed and its plain form (an n-gram: itself), found through the
GIN index one term at a time; ``ts_rank`` knows no document frequencies, so the ranking is
computed by :mod:`worker.store.search` from these postings. Terms reach SQL as bound,
quoted lexemes: no query text is read as tsquery syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store.search_text import CONFIG, DOCS, IndexText, QueryTerms

_CONFIG: Final = f"CAST((SELECT config FROM {CONFIG}) AS regconfig)"

_INSERT: Final = sa.text(
    f"""INSERT INTO {DOCS} (namespace_id, entry_id, doc_len, repeats, tsv)
        VALUES (:ns, :entry_id, :doc_len, :repeats,
                setweight(to_tsvector({_CONFIG}, :words), 'A')
                || setweight(to_tsvector('simple', :words), 'B')
                || array_to_tsvector(CAST(:grams AS text[])))"""
)

#: The query's terms, numbered in order (the words, then the n-grams), each as its tsquery,
#: computed once per statement (inside a filter, ``to_tsquery`` with a configuration read from
#: a table would be re-parsed for every row). The terms arrive as two arrays, so the statement's
#: text is the same for every query and is prepared once per connection.
_TERMS: Final = (
    "WITH terms AS MATERIALIZED ("
    f"SELECT w.i - 1 AS i, to_tsquery({_CONFIG}, w.q) || to_tsquery('simple', w.q) AS tq "
    "FROM unnest(CAST(:words AS text[])) WITH ORDINALITY AS w(q, i) "
    "UNION ALL SELECT cardinality(CAST(:words AS text[])) + g.i - 1, CAST(g.q AS tsquery) "
    "FROM unnest(CAST(:grams AS text[])) WITH ORDINALITY AS g(q, i))"
)
#: Per term, up to ``:cap`` entries of the namespace holding it, through the GIN index (one
#: lookup per term); one row per term, its ids aggregated (cheaper to read than a row per posting).
_POSTINGS: Final = sa.text(
    f"{_TERMS} SELECT t.i, array_agg(d.id) FROM terms t CROSS JOIN LATERAL "
    f"(SELECT id FROM {DOCS} WHERE namespace_id = :ns AND tsv @@ t.tq LIMIT :cap) d "
    "GROUP BY t.i"
)
#: The newest entries of a namespace, read once through the ``(namespace_id, id)`` index:
#: every common term is then tested on these rows only (a GIN lookup of a term held by most
#: entries would visit all of them).
_WINDOW: Final = sa.text(
    f"{_TERMS}, win AS MATERIALIZED (SELECT id, tsv FROM {DOCS} WHERE namespace_id = :ns "
    "ORDER BY id DESC LIMIT :newest) "
    "SELECT t.i, array_agg(w.id) FROM win w JOIN terms t ON w.tsv @@ t.tq GROUP BY t.i"
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


def _run(
    conn: Connection, statement: sa.TextClause, terms: QueryTerms, params: dict[str, object]
) -> dict[str, list[int]]:
    listed = terms.all
    if not listed:
        return {}
    found: dict[str, list[int]] = {term: [] for term in listed}
    bound = {
        **params,
        "words": [_lexeme(w) for w in terms.words],
        "grams": [_lexeme(g) for g in terms.grams],
    }
    for i, docs in conn.execute(statement, bound).all():
        found[listed[int(i)]].extend(docs)  # int8[]: a list of ints already
    return found


def postings(conn: Connection, ns_id: int, terms: QueryTerms, cap: int) -> dict[str, list[int]]:
    """Per term, ids of up to ``cap`` indexed entries of ``ns_id`` holding it: one
    statement, a GIN lookup per term."""
    return _run(conn, _POSTINGS, terms, {"ns": ns_id, "cap": cap})


def window_postings(
    conn: Connection, ns_id: int, terms: QueryTerms, newest: int
) -> dict[str, list[int]]:
    """Per term, the ids among the ``newest`` most recent entries of ``ns_id`` holding it."""
    return _run(conn, _WINDOW, terms, {"ns": ns_id, "newest": newest})
