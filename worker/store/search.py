r"""Search: the full-text index kept by the commit's transaction, its BM25 ranking, and dense
vectors.

**The index** holds exactly the active entries: every write of ``entries`` (a commit, a
rollback, an import, an erase) updates it inside its own transaction, so it can never show a
half-commit, a superseded entry or an erased one; a search joins back to ``entries`` (active,
same namespace) besides. The backends are :mod:`~worker.store.search_sqlite` (FTS5) and
:mod:`~worker.store.search_postgres` (``tsvector`` + GIN); the text both index is
:mod:`~worker.store.search_text`.

**The ranking** is BM25 over a namespace's postings, the same on both databases
(:func:`worker.bm25.scores`): ``tf`` is the times the entry holds the term (the index keeps the
counts above one), ``N`` and ``avglen`` are the namespace's (per-namespace IDF: another user's
words never weigh on this user's ranking). The term frequency counts even in entries of one
sentence: an entry that names the subject of a query twice is about it, where one that mentions
it in passing is not.

>>> ranked = rank({"tea": [1, 2], "oslo": [2]}, {"tea": 2, "oslo": 1}, {1: 3, 2: 3},
...               docs=10, avg_len=3.0)
>>> [(doc, round(score, 2)) for doc, score in ranked]
[(2, 3.47), (1, 1.48)]
>>> [doc for doc, _ in rank({"tea": [1, 2]}, {"tea": 2}, {1: 3, 2: 3}, docs=10, avg_len=3.0,
...                         repeats={1: {"tea": 2}})]
[1, 2]

**Vectors** are written by the worker *after* the commit that wrote their entries (embedding is
a network call; it never holds a transaction open), so storing one re-checks, in its own
transaction, that the entry is still active with the very text that was embedded: a vector for
an entry superseded, rewritten or erased meanwhile is dropped. An entry that stops being active
loses its vector in the transaction that retires it (:func:`discard`); an erase deletes the
namespace's vectors in its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.bm25 import idf, scores
from worker.errors import ConfigurationError
from worker.models import Entry
from worker.store import search_postgres, search_sqlite
from worker.store.engine import dialect_insert
from worker.store.schema import entries, entry_vectors, namespaces
from worker.store.search_text import DOCS, STATS, QueryTerms, index_text, repeats_of, term_key
from worker.types import require_utc

#: Length normalisation, lighter than the usual 0.75: entries are all about one sentence, so a
#: longer one is more specific rather than padded (tuned with ``python -m bench search``).
B: Final = 0.3


def unweighted(
    postings: Mapping[str, Sequence[int]], df: Mapping[str, int], docs: int
) -> dict[int, float]:
    """Each candidate's summed IDF, before term frequencies and length normalisation (a cheap
    first cut: it needs no row of the candidates)."""
    scores: dict[int, float] = {}
    for term, ids in postings.items():
        weight = idf(df[term], docs)
        for doc in ids:
            scores[doc] = scores.get(doc, 0.0) + weight
    return scores


def rank(
    postings: Mapping[str, Sequence[int]],
    df: Mapping[str, int],
    lengths: Mapping[int, int],
    *,
    docs: int,
    avg_len: float,
    repeats: Mapping[int, Mapping[str, int]] | None = None,
) -> list[tuple[int, float]]:
    """``(doc, BM25 score)`` of the docs in ``lengths``, best first (ties: newest first).
    ``repeats[doc][term]`` is the term frequency of a term ``doc`` holds more than once (one
    otherwise)."""
    counts = repeats or {}
    found = scores(
        ((term, df[term], ids) for term, ids in postings.items()),
        docs=docs,
        avg_len=avg_len,
        lengths=lengths,
        tf=lambda doc, term: counts.get(doc, {}).get(term, 1),
        b=B,
    )
    return sorted(found.items(), key=lambda pair: (-pair[1], -pair[0]))


#: Entry ids per ``IN (…)`` list when syncing (below SQLite's bound-parameter limit).
SYNC_CHUNK = 500
#: A query term held by at most this many entries of the namespace is *rare*: every entry
#: holding it is ranked. Bounds a query's work whatever the namespace's size (see
#: :func:`search`).
RARE_DOCS = 300
#: The newest entries of a namespace that terms held by more than ``RARE_DOCS`` entries rank.
COMMON_WINDOW = 500
#: Candidates (by summed IDF) whose lengths are read for the final BM25 ranking, in a
#: namespace larger than the window (a smaller one ranks all of its at most
#: ``COMMON_WINDOW`` candidates, so its ranking is exact as :func:`search` says).
RERANKED = 100

_BUMP_STATS = sa.text(
    f"""INSERT INTO {STATS} (namespace_id, docs, total_len) VALUES (:ns, :docs, :total)
        ON CONFLICT (namespace_id) DO UPDATE
        SET docs = {STATS}.docs + excluded.docs,
            total_len = {STATS}.total_len + excluded.total_len"""
)
_DOC_ROWS = sa.text(
    f"SELECT id, entry_id, doc_len, repeats FROM {DOCS} WHERE id IN :ids"
).bindparams(sa.bindparam("ids", expanding=True))
#: PostgreSQL: the ids as one array, so the statement's text is the same whatever their
#: number and is prepared once per connection (an expanded ``IN`` list is a new statement for
#: each count).
_DOC_ROWS_PG = sa.text(
    f"SELECT id, entry_id, doc_len, repeats FROM {DOCS} WHERE id = ANY(CAST(:ids AS bigint[]))"
)

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
        removed = backend.delete(conn, ns_id, chunk)
        active = conn.execute(
            sa.select(entries.c.id, entries.c.text).where(
                entries.c.namespace_id == ns_id,
                entries.c.id.in_(chunk),
                entries.c.invalid_at.is_(None),
            )
        ).all()
        texts = [(r.id, index_text(r.text)) for r in active]
        backend.insert(conn, ns_id, texts)
        _bump_stats(
            conn, ns_id, len(texts) - len(removed), sum(t.length for _, t in texts) - sum(removed)
        )
        discard(conn, ns_id, {r.id: r.text for r in active}, chunk)


def sync_written(
    conn: Connection, ns_id: int, *, new: Sequence[Entry], changed: Sequence[Entry]
) -> None:
    """:func:`sync_entries` for the entries a commit just wrote, from the rows it wrote.

    Same result, fewer statements (a batch's commit is the hot path): texts and validity come
    from the values just written, and a brand-new entry skips the delete and the vector
    lookup, since its id did not exist in the namespace before this transaction. A changed
    entry is taken out first, as :func:`sync_entries` does.
    """
    backend = _backend(conn)
    removed: list[int] = []
    changed = list({e.id: e for e in changed}.values())
    for start in range(0, len(changed), SYNC_CHUNK):
        chunk = changed[start : start + SYNC_CHUNK]
        ids = [e.id for e in chunk]
        removed += backend.delete(conn, ns_id, ids)
        discard(conn, ns_id, {e.id: e.text for e in chunk if e.invalid_at is None}, ids)
    # An entry both inserted and changed is indexed once, as changed (its final row).
    changed_ids = {e.id for e in changed}
    written = [*(e for e in new if e.id not in changed_ids), *changed]
    texts = [(e.id, index_text(e.text)) for e in written if e.invalid_at is None]
    for start in range(0, len(texts), SYNC_CHUNK):
        backend.insert(conn, ns_id, texts[start : start + SYNC_CHUNK])
    _bump_stats(
        conn, ns_id, len(texts) - len(removed), sum(t.length for _, t in texts) - sum(removed)
    )


def sync_path(conn: Connection, ns_id: int, path: str) -> None:
    """:func:`sync_entries` for every entry of one file (a rollback flips many at once)."""
    ids = conn.execute(
        sa.select(entries.c.id).where(entries.c.namespace_id == ns_id, entries.c.path == path)
    ).scalars()
    sync_entries(conn, ns_id, list(ids))


def sync_namespace(conn: Connection, ns_id: int) -> None:
    """Index every active entry of a namespace from scratch (an import, a rebuild)."""
    drop_namespaces(conn, [ns_id])
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
        conn.execute(
            sa.text(f"DELETE FROM {STATS} WHERE namespace_id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": list(ns_ids)},
        )


def rebuild(conn: Connection) -> int:
    """Rebuild the whole index from the active entries (the migration's backfill, a change of
    text-search configuration); returns the number of entries indexed."""
    backend = _backend(conn)
    backend.clear(conn)
    conn.exec_driver_sql(f"DELETE FROM {STATS}")
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
            texts = [(r.id, index_text(r.text)) for r in rows]
            backend.insert(conn, ns_id, texts)
            _bump_stats(conn, ns_id, len(texts), sum(t.length for _, t in texts))
            indexed += len(rows)
            last = rows[-1].id
    return indexed


def backfill_repeats(conn: Connection) -> int:
    """Write ``repeats`` of every indexed entry from its text (migration ``0006``, for an
    index filled before the column existed); returns the number of entries written."""
    written, last = 0, 0
    while True:
        rows = conn.execute(
            sa.text(
                f"SELECT d.id, e.text FROM {DOCS} d JOIN entries e "
                "ON e.namespace_id = d.namespace_id AND e.id = d.entry_id "
                "WHERE d.id > :last ORDER BY d.id LIMIT :n"
            ),
            {"last": last, "n": REBUILD_CHUNK},
        ).all()
        if not rows:
            return written
        conn.execute(
            sa.text(f"UPDATE {DOCS} SET repeats = :repeats WHERE id = :id"),
            [{"id": int(r[0]), "repeats": index_text(r[1]).repeats} for r in rows],
        )
        written += len(rows)
        last = int(rows[-1][0])


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


@dataclass(frozen=True)
class Head:
    """What a search reads of its namespace before the index: its row id, its version (every
    commit moves it), its vector counter (every change of its vectors moves it) and the
    index's statistics of it (BM25's ``N`` and total length)."""

    ns_id: int
    version: int
    vector_epoch: int
    docs: int
    total_len: int

    @property
    def fingerprint(self) -> tuple[int, int]:
        """(version, vector counter): changes whenever the namespace's vectors may have."""
        return self.version, self.vector_epoch


_HEAD = sa.text(
    f"""SELECT n.id, n.version, s.vector_epoch, s.docs, s.total_len
        FROM {namespaces.name} n LEFT JOIN {STATS} s ON s.namespace_id = n.id
        WHERE n.key = :key"""
)


def head(conn: Connection, namespace: str) -> Head | None:
    """``namespace``'s :class:`Head`, in one indexed read; None when it was never committed."""
    row = conn.execute(_HEAD, {"key": namespace}).first()
    if row is None:
        return None
    return Head(int(row[0]), int(row[1]), int(row[2] or 0), int(row[3] or 0), int(row[4] or 0))


def search(conn: Connection, at: Head, terms: QueryTerms, limit: int) -> list[tuple[str, float]]:
    """``(entry id, score)`` of the best ``limit`` active entries of the namespace ``at``
    heads for ``terms``, best first (BM25, :mod:`worker.store.search`); empty when
    ``terms`` is. ``at`` is read in the same transaction (the statistics of that snapshot).

    The work is bounded by the constants above, not by the namespace's size. The newest
    :data:`COMMON_WINDOW` entries are read first, each term tested on them: for a namespace
    that small, that is every entry and the ranking is exact. In a larger one, a term the
    window suggests is *rare* (held by at most :data:`RARE_DOCS` entries) has its entries
    fetched, and if there are no more, all are candidates, ranked exactly. The others are
    *common* (a speaker's name in all their memories): they count for the window's entries
    only, their document frequency estimated from it.
    """
    if not terms or limit < 1:
        return []
    ns_id, docs, total_len = at.ns_id, at.docs, at.total_len
    if docs == 0:
        return []
    backend = _backend(conn)
    window = min(COMMON_WINDOW, docs)
    postings = backend.window_postings(conn, ns_id, terms, window)
    df = {t: len(ids) for t, ids in postings.items()}
    if docs > window:
        estimate = {t: len(ids) * docs / window for t, ids in postings.items()}
        likely_rare = _only(terms, lambda t: estimate.get(t, 0) <= 2 * RARE_DOCS)
        fetched = backend.postings(conn, ns_id, likely_rare, RARE_DOCS + 1)
        for term in terms.all:
            ids = fetched.get(term)
            if ids is not None and len(ids) <= RARE_DOCS:
                postings[term], df[term] = ids, len(ids)
            else:
                df[term] = max(RARE_DOCS + 1, round(estimate.get(term, 0)))
    postings = {t: ids for t, ids in postings.items() if ids}
    first_cut = unweighted(postings, df, docs)
    keep = sorted(first_cut, key=lambda d: (-first_cut[d], -d))
    if docs > window:  # within the window every candidate is ranked: the ranking is exact
        keep = keep[: max(RERANKED, limit)]
    lengths, entry_ids, repeats = _doc_rows(conn, keep, terms)
    ranked = rank(postings, df, lengths, docs=docs, avg_len=total_len / docs, repeats=repeats)
    return [(entry_ids[doc], score) for doc, score in ranked[:limit]]


def _only(terms: QueryTerms, keep: Callable[[str], bool]) -> QueryTerms:
    return QueryTerms(
        tuple(w for w in terms.words if keep(w)), tuple(g for g in terms.grams if keep(g))
    )


def _bump_stats(conn: Connection, ns_id: int, docs: int, total_len: int) -> None:
    if docs or total_len:
        conn.execute(_BUMP_STATS, {"ns": ns_id, "docs": docs, "total": total_len})


def _doc_rows(
    conn: Connection, doc_ids: Sequence[int], terms: QueryTerms
) -> tuple[dict[int, int], dict[int, str], dict[int, dict[str, int]]]:
    """Length and entry id of each of ``doc_ids``, and the count of each of ``terms`` those
    holding it more than once hold (by query term)."""
    lengths: dict[int, int] = {}
    entry_ids: dict[int, str] = {}
    repeats: dict[int, dict[str, int]] = {}
    keys = [(t, term_key(t)) for t in terms.words] + [(g, g) for g in terms.grams]
    statement = _DOC_ROWS_PG if conn.dialect.name == "postgresql" else _DOC_ROWS
    for start in range(0, len(doc_ids), SYNC_CHUNK):
        rows = conn.execute(statement, {"ids": list(doc_ids[start : start + SYNC_CHUNK])}).all()
        for doc, entry_id, length, held in rows:
            lengths[int(doc)] = int(length)
            entry_ids[int(doc)] = str(entry_id)
            if held:
                counts = repeats_of(held)
                repeats[int(doc)] = {t: counts[k] for t, k in keys if k in counts}
    return lengths, entry_ids, repeats


@dataclass(frozen=True)
class PendingText:
    """An active entry whose text has no vector from the current model yet."""

    entry_id: str
    text: str


@dataclass(frozen=True)
class Embedded:
    """One vector to store: float32 bytes of ``dim`` values for ``text`` of ``entry_id``."""

    entry_id: str
    text: str
    vector: bytes
    dim: int


def text_digest(text: str) -> str:
    """The digest a vector records of the text it was computed from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pending(conn: Connection, ns_id: int, model: str, limit: int) -> list[PendingText]:
    """Up to ``limit`` active entries of ``ns_id`` with no vector from ``model`` (none yet, or
    one from another model), oldest first."""
    v = entry_vectors
    rows = conn.execute(
        sa.select(entries.c.id, entries.c.text)
        .select_from(
            entries.outerjoin(
                v, sa.and_(v.c.namespace_id == entries.c.namespace_id, v.c.entry_id == entries.c.id)
            )
        )
        .where(
            entries.c.namespace_id == ns_id,
            entries.c.invalid_at.is_(None),
            sa.or_(v.c.entry_id.is_(None), v.c.model != model),
        )
        .order_by(entries.c.created_at, entries.c.id)
        .limit(limit)
    )
    return [PendingText(r.id, r.text) for r in rows]


def store(
    conn: Connection, ns_id: int, model: str, items: Sequence[Embedded], *, now: datetime
) -> int:
    """Store ``items`` whose entry is still active with the same text; returns how many."""
    now = require_utc(now, "now")
    current = dict(
        conn.execute(
            sa.select(entries.c.id, entries.c.text).where(
                entries.c.namespace_id == ns_id,
                entries.c.id.in_([i.entry_id for i in items]),
                entries.c.invalid_at.is_(None),
            )
        ).all()
    )
    rows = [
        {
            "namespace_id": ns_id,
            "entry_id": i.entry_id,
            "model": model,
            "dim": i.dim,
            "text_digest": text_digest(i.text),
            "vector": i.vector,
            "embedded_at": now,
        }
        for i in items
        if current.get(i.entry_id) == i.text
    ]
    if rows:
        stmt = dialect_insert(conn, entry_vectors)
        keep = ("model", "dim", "text_digest", "vector", "embedded_at")
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["namespace_id", "entry_id"],
                set_={k: getattr(stmt.excluded, k) for k in keep},
            ),
            rows,
        )
        _moved(conn, ns_id)
    return len(rows)


def discard(conn: Connection, ns_id: int, active: dict[str, str], entry_ids: Sequence[str]) -> None:
    """Delete the vectors of ``entry_ids`` that are no longer active or whose text changed;
    ``active`` maps the active ones among them to their current text."""
    v = entry_vectors
    stored = conn.execute(
        sa.select(v.c.entry_id, v.c.text_digest).where(
            v.c.namespace_id == ns_id, v.c.entry_id.in_(list(entry_ids))
        )
    ).all()
    stale = [
        r.entry_id
        for r in stored
        if r.entry_id not in active or text_digest(active[r.entry_id]) != r.text_digest
    ]
    if stale:
        conn.execute(sa.delete(v).where(v.c.namespace_id == ns_id, v.c.entry_id.in_(stale)))
        _moved(conn, ns_id)


def active_vectors(conn: Connection, ns_id: int, model: str) -> tuple[list[str], list[bytes], int]:
    """Entry ids and vectors from ``model`` of the active entries of ``ns_id``, and the
    dimension (0 when there are none)."""
    v = entry_vectors
    rows = conn.execute(
        sa.select(v.c.entry_id, v.c.vector, v.c.dim)
        .join(
            entries,
            sa.and_(entries.c.namespace_id == v.c.namespace_id, entries.c.id == v.c.entry_id),
        )
        .where(v.c.namespace_id == ns_id, v.c.model == model, entries.c.invalid_at.is_(None))
    ).all()
    dims = {int(r.dim) for r in rows}
    if len(dims) > 1:  # one model, one dimension; anything else is not ours to guess
        return [], [], 0
    return [r.entry_id for r in rows], [bytes(r.vector) for r in rows], dims.pop() if dims else 0


def _moved(conn: Connection, ns_id: int) -> None:
    """Move the namespace's vector counter (read with its version by
    :func:`worker.store.search.head`): every transaction that stores or deletes one of
    its vectors calls this, so a search keeping its vectors in memory sees the change."""
    conn.execute(
        sa.text(f"UPDATE {STATS} SET vector_epoch = vector_epoch + 1 WHERE namespace_id = :ns"),
        {"ns": ns_id},
    )


def drop_namespace_vectors(conn: Connection, ns_ids: Sequence[int]) -> int:
    """Delete every vector of ``ns_ids`` (erase); rows deleted."""
    v = entry_vectors
    return int(conn.execute(sa.delete(v).where(v.c.namespace_id.in_(list(ns_ids)))).rowcount)
