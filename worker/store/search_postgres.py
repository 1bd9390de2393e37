"""The PostgreSQL search index: a GIN-indexed ``tsvector`` per entry, ranked by BM25.

An entry's vector is its words under the deployment's text-search configuration (stemmed,
weight A) plus the same words under ``simple`` (language-neutral, weight B: names, other
languages, words the stemmer mangles) plus its n-grams verbatim (``array_to_tsvector``).

``ts_rank`` knows nothing of other documents (no IDF), so ranking is computed here: one
statement finds the namespace's matching entries through the GIN index, counts each query
term's document frequency among them (exact: an entry holding a term always matches the OR
query), reads the namespace's ``N`` and total length from ``search_stats``, and scores

    Σ over matched terms  ln(1 + (N − df + 0.5)/(df + 0.5)) · (k1 + 1) / (1 + k1·(1 − b + b·ℓ))

with ℓ = len/avglen: BM25 with a term frequency of one (memory entries are one sentence; a
term rarely repeats). Terms reach SQL as bound, quoted lexemes: no query text is read as
tsquery syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store.search_ddl import CONFIG, DOCS, STATS
from worker.store.search_text import IndexText, QueryTerms

#: BM25's term-saturation and length-normalisation constants (the usual defaults).
K1: Final = 1.2
B: Final = 0.75

_CONFIG: Final = f"CAST((SELECT config FROM {CONFIG}) AS regconfig)"

_INSERT: Final = sa.text(
    f"""INSERT INTO {DOCS} (namespace_id, entry_id, doc_len, tsv)
        VALUES (:ns, :entry_id, :doc_len,
                setweight(to_tsvector({_CONFIG}, :words), 'A')
                || setweight(to_tsvector('simple', :words), 'B')
                || array_to_tsvector(CAST(:grams AS text[])))"""
)

_BUMP_STATS: Final = sa.text(
    f"""INSERT INTO {STATS} (namespace_id, docs, total_len) VALUES (:ns, :docs, :total)
        ON CONFLICT (namespace_id) DO UPDATE
        SET docs = {STATS}.docs + EXCLUDED.docs,
            total_len = {STATS}.total_len + EXCLUDED.total_len"""
)

_SEARCH: Final = sa.text(
    f"""WITH terms AS (
            SELECT w.ord, to_tsquery({_CONFIG}, w.q) || to_tsquery('simple', w.q) AS tq
            FROM unnest(CAST(:words AS text[])) WITH ORDINALITY AS w(q, ord)
            UNION ALL
            SELECT 100000 + g.ord, CAST(g.q AS tsquery)
            FROM unnest(CAST(:grams AS text[])) WITH ORDINALITY AS g(q, ord)
        ),
        hits AS MATERIALIZED (
            SELECT d.entry_id, d.doc_len, d.tsv FROM {DOCS} d
            WHERE d.namespace_id = :ns AND d.tsv @@ (
                SELECT CAST(string_agg(CAST(tq AS text), ' | ') AS tsquery)
                FROM terms WHERE numnode(tq) > 0)
        ),
        pairs AS (SELECT h.entry_id, h.doc_len, t.ord FROM hits h JOIN terms t ON h.tsv @@ t.tq),
        df AS (SELECT ord, count(*) AS n FROM pairs GROUP BY ord),
        st AS (SELECT docs, greatest(total_len, 1) AS total_len FROM {STATS}
               WHERE namespace_id = :ns)
        SELECT p.entry_id,
               sum(ln(1 + (st.docs - df.n + 0.5) / (df.n + 0.5))
                   * {K1 + 1} / (1 + {K1} * (1 - {B} + {B} * CAST(p.doc_len AS float8)
                                                  * st.docs / st.total_len))) AS score
        FROM pairs p JOIN df USING (ord) CROSS JOIN st
        GROUP BY p.entry_id
        ORDER BY score DESC, p.entry_id
        LIMIT :limit"""
)


def _lexeme(term: str) -> str:
    """``term`` as one quoted tsquery operand (quotes doubled, backslashes escaped)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def delete(conn: Connection, ns_id: int, entry_ids: Sequence[str]) -> None:
    """Take ``entry_ids`` of namespace ``ns_id`` out of the index (absent ones are ignored)."""
    if not entry_ids:
        return
    lengths = (
        conn.execute(
            sa.text(
                f"DELETE FROM {DOCS} WHERE namespace_id = :ns AND entry_id = ANY(:ids) "
                "RETURNING doc_len"
            ),
            {"ns": ns_id, "ids": list(entry_ids)},
        )
        .scalars()
        .all()
    )
    if lengths:
        conn.execute(_BUMP_STATS, {"ns": ns_id, "docs": -len(lengths), "total": -sum(lengths)})


def insert(conn: Connection, ns_id: int, rows: Sequence[tuple[str, IndexText]]) -> None:
    """Index ``rows`` (entry id, its index text) of namespace ``ns_id``; none may be indexed."""
    if not rows:
        return
    params = [
        {
            "ns": ns_id,
            "entry_id": entry_id,
            "doc_len": text.length,
            "words": text.words,
            "grams": list(dict.fromkeys(text.grams.split())),
        }
        for entry_id, text in rows
    ]
    conn.execute(_INSERT, params)
    total = sum(text.length for _, text in rows)
    conn.execute(_BUMP_STATS, {"ns": ns_id, "docs": len(rows), "total": total})


def drop_namespaces(conn: Connection, ns_ids: Sequence[int]) -> None:
    """Remove every indexed entry of ``ns_ids`` (erase)."""
    ids = list(ns_ids)
    conn.execute(sa.text(f"DELETE FROM {DOCS} WHERE namespace_id = ANY(:ids)"), {"ids": ids})
    conn.execute(sa.text(f"DELETE FROM {STATS} WHERE namespace_id = ANY(:ids)"), {"ids": ids})


def clear(conn: Connection) -> None:
    """Empty the whole index (before a rebuild)."""
    conn.exec_driver_sql(f"DELETE FROM {DOCS}")
    conn.exec_driver_sql(f"DELETE FROM {STATS}")


def configured(conn: Connection) -> str:
    """The text-search configuration the index is built with."""
    return str(conn.exec_driver_sql(f"SELECT config FROM {CONFIG}").scalar_one())


def set_config(conn: Connection, config: str) -> None:
    """Record ``config`` (the caller rebuilds the index); an unknown one raises."""
    conn.execute(sa.text("SELECT CAST(:c AS regconfig)"), {"c": config})
    conn.execute(sa.text(f"UPDATE {CONFIG} SET config = :c"), {"c": config})


def search(conn: Connection, ns_id: int, terms: QueryTerms, limit: int) -> list[tuple[str, float]]:
    """``(entry id, BM25 score)`` of the best ``limit`` indexed entries, best first."""
    rows = conn.execute(
        _SEARCH,
        {
            "ns": ns_id,
            "words": [_lexeme(w) for w in terms.words],
            "grams": [_lexeme(g) for g in terms.grams],
            "limit": limit,
        },
    )
    return [(str(r[0]), float(r[1])) for r in rows]
