r"""Search: the full-text index kept by the commit's transaction, its BM25 ranking, and dense
vectors.

The search index's tables: the one place that knows each dialect's full-text DDL.

They are not in :data:`worker.store.schema.metadata` (SQLAlchemy cannot describe an FTS5
table or a GIN index portably); migration ``0004`` creates them with :func:`create`, and
schema comparisons leave them out through :func:`is_index_object`.

Both dialects: ``search_docs`` has a row per indexed (active) entry with its length in terms
and the terms it holds more than once (``repeats``, added by migration ``0006``: BM25's term
frequency, read with the length), and ``search_stats`` the number and total length of a
namespace's indexed entries (BM25's ``N`` and average length), kept by the same
transactions, and a counter every change of its vectors moves (so a search can keep a
namespace's vectors in memory between queries).

* **SQLite**: ``search_docs.id`` is the rowid of the entry's row in ``search_fts``, an FTS5
  table of two columns, ``words`` and ``grams`` (see :mod:`worker.store.search`). Ids are
  ``namespace id << 32 | sequence``: a namespace is one rowid range, which FTS5 seeks to inside
  its index (no filter per row), and its newest entries are the top of that range. Tokenizer:
  porter over unicode61, diacritics removed, combining marks kept inside tokens (Devanagari
  and Thai vowel signs are marks).
* **PostgreSQL**: ``search_docs.tsv`` holds the entry's ``tsvector``, GIN-indexed with a
  small fast-update pending list (:data:`GIN_PENDING_LIST_KB`): a commit appends its entries
  to the list, and the commit that fills it merges the list into the index in one sorted pass.
  Indexing each entry directly cost a commit most of its search-index insert (3.2–4.5 ms of
  a 40-entry batch against 1.1–1.4 ms); the list is capped so small that a query's scan of it
  stays a few pages (PostgreSQL's default cap, 4 MB, would be a linear scan of thousands of
  entries);
  ``(namespace_id, id)`` is indexed for a namespace's newest entries; ``search_config`` names
  the one text-search configuration the vectors were built with.

The text the search index holds for an entry, and the terms a query looks for.

One normal form on both sides, so index and query always agree: NFKC, case-folded, Latin,
Greek and Cyrillic diacritics removed ("café" finds "cafe"), then cut into

* **words**: runs of letters with their combining marks and digits (``\\p{L}\\p{M}\\p{N}``,
  so Devanagari vowel signs stay inside their word), for scripts that space their words;
* **grams** for scripts that do not (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
  Myanmar), where a tokenizer would keep a whole clause as one token: an entry indexes each
  run's characters and character bigrams (Thai-like scripts: bigrams only, since a single
  Thai letter says nothing); a query looks for the bigrams of its runs (the character itself
  for a one-character run), so the 2-character query "北京" finds "我住在北京".

An entry also records the terms it holds more than once, with their counts (BM25's term
frequency; see :func:`term_key` for what counts as the same term).

A query's words lose English stopwords ("what did she say about tea" looks for "say" and
"tea"), unless nothing would be left. Terms are plain strings: the backends quote them, so no
query text is ever read as search syntax.

>>> index_text("I moved to Café Zürich!").words
'i moved to cafe zurich'
>>> index_text("我住在北京").grams
'我 住 在 北 京 我住 住在 在北 北京'
>>> index_text("Chocolate cake with raspberries and a raspberry glaze").repeats
'raspberry:2'
>>> query_terms('What did "Ann" say about *tea*?')
QueryTerms(words=('ann', 'say', 'tea'), grams=())
>>> query_terms("北京"), query_terms("the")
(QueryTerms(words=(), grams=('北京',)), QueryTerms(words=('the',), grams=()))

BM25 over a namespace's postings: the ranking both databases' indexes share.

Each candidate entry is scored by :func:`worker.bm25.scores`, ``tf`` the times the entry
holds the term (the index keeps the counts above one), ``N`` and ``avglen`` those of the
namespace (per-namespace IDF: another user's words never weigh on this user's ranking).

The term frequency counts even in entries of one sentence: an entry that names the subject of
a query twice ("dairy-free chocolate cake with raspberries ..., chocolate, and raspberries")
is about it, where one that mentions it in passing is not. Ranking every entry as if each term
occurred once found 5 fewer of 1,311 LoCoMo questions at recall@10 (79.9% against 80.3%; 1 of
631 on the first five conversations, 4 of 680 on the held-out five; ``python -m bench
search``).

>>> ranked = rank({"tea": [1, 2], "oslo": [2]}, {"tea": 2, "oslo": 1}, {1: 3, 2: 3},
...               docs=10, avg_len=3.0)
>>> [(doc, round(score, 2)) for doc, score in ranked]
[(2, 3.47), (1, 1.48)]
>>> [doc for doc, _ in rank({"tea": [1, 2]}, {"tea": 2}, {1: 3, 2: 3}, docs=10, avg_len=3.0,
...                         repeats={1: {"tea": 2}})]
[1, 2]

The full-text index of active entries, kept by the same transactions that write entries.

Every write of ``entries`` (a commit, a rollback, an import, an erase) calls one of the
functions here inside its own transaction, so the index can never show a half-commit, a
superseded entry or an erased one: it holds exactly the active entries, and a search joins
back to ``entries`` (active, same namespace) besides. The backends are
:mod:`~worker.store.search_sqlite` (FTS5, ``bm25()``) and :mod:`~worker.store.search_postgres`
(``tsvector`` + GIN, BM25 from per-namespace statistics); the text both index is
:mod:`~worker.store.search`.

Dense vectors of entries: which still need one, storing them, reading a namespace's.

Vectors are written by the worker *after* the commit that wrote their entries (embedding is
a network call; it never holds a transaction open), so storing one re-checks, in its own
transaction, that the entry is still active with the very text that was embedded: a vector
for an entry superseded, rewritten or erased meanwhile is dropped, never stored. Erasing a
namespace deletes its vectors in the erase transaction; an entry that stops being active
loses its vector in the transaction that retires it (:func:`discard`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any, Final

import regex
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.bm25 import idf, scores
from worker.errors import ConfigurationError
from worker.models import Entry
from worker.store.engine import dialect_insert
from worker.store.schema import entries, entry_vectors, namespaces
from worker.types import MAX_ID_LENGTH, require_utc

DOCS: Final = "search_docs"
FTS: Final = "search_fts"
STATS: Final = "search_stats"
CONFIG: Final = "search_config"
#: The column of ``search_docs`` holding an entry's repeated terms.
REPEATS: Final = "repeats"

#: The configuration a new PostgreSQL index is built with (``MEMWORKER_TEXT_SEARCH_CONFIG``
#: changes it through :func:`worker.store.search.configure`).
DEFAULT_CONFIG: Final = "english"

FTS_TOKENIZER: Final = "porter unicode61 remove_diacritics 2 categories 'L* N* Co M*'"

#: Cap of the GIN index's pending list, in kB: PostgreSQL's smallest. A few hundred entries'
#: lexemes wait there (read by every query of the index, page by page) until the commit that
#: fills it merges them into the index at once, which costs less than indexing each on its
#: own; 4 MB, the default, would let a query scan thousands.
GIN_PENDING_LIST_KB: Final = 64
_GIN_OPTIONS: Final = f"fastupdate = on, gin_pending_list_limit = {GIN_PENDING_LIST_KB}"

_STATS_DDL: Final = f"""CREATE TABLE {STATS} (
        namespace_id BIGINT PRIMARY KEY REFERENCES namespaces (id) ON DELETE CASCADE,
        docs BIGINT NOT NULL,
        total_len BIGINT NOT NULL,
        vector_epoch BIGINT NOT NULL DEFAULT 0
    )"""

_SQLITE: Final = (
    f"""CREATE TABLE {DOCS} (
        id INTEGER PRIMARY KEY,
        namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
        entry_id VARCHAR({MAX_ID_LENGTH}) NOT NULL,
        doc_len INTEGER NOT NULL,
        repeats TEXT NOT NULL DEFAULT '',
        CONSTRAINT uq_{DOCS}_namespace_id_entry_id UNIQUE (namespace_id, entry_id)
    )""",
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(words, grams, tokenize="{FTS_TOKENIZER}")""",
    _STATS_DDL,
)

_POSTGRES: Final = (
    f"""CREATE TABLE {DOCS} (
        id BIGSERIAL PRIMARY KEY,
        namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
        entry_id VARCHAR({MAX_ID_LENGTH}) NOT NULL,
        doc_len INTEGER NOT NULL,
        repeats TEXT NOT NULL DEFAULT '',
        tsv TSVECTOR NOT NULL,
        CONSTRAINT uq_{DOCS}_namespace_id_entry_id UNIQUE (namespace_id, entry_id)
    )""",
    f"CREATE INDEX ix_{DOCS}_tsv ON {DOCS} USING gin (tsv) WITH ({_GIN_OPTIONS})",
    f"CREATE INDEX ix_{DOCS}_namespace_id_id ON {DOCS} (namespace_id, id)",
    _STATS_DDL,
    f"CREATE TABLE {CONFIG} (id INTEGER PRIMARY KEY CHECK (id = 1), config TEXT NOT NULL)",
    f"INSERT INTO {CONFIG} (id, config) VALUES (1, '{DEFAULT_CONFIG}')",
)

#: Tables FTS5 creates beside ``search_fts`` to hold its index.
_FTS_SHADOWS: Final = tuple(f"{FTS}_{s}" for s in ("data", "idx", "content", "docsize", "config"))
#: Every table name this module owns, on either dialect.
TABLES: Final = frozenset({DOCS, FTS, STATS, CONFIG, *_FTS_SHADOWS})


def create(conn: Connection) -> None:
    """Create the index tables of ``conn``'s dialect (empty; see ``search_index.rebuild``)."""
    for ddl in _POSTGRES if conn.dialect.name == "postgresql" else _SQLITE:
        conn.exec_driver_sql(ddl)


def add_repeats(conn: Connection) -> bool:
    """Add ``search_docs.repeats`` to an index created before it existed (migration
    ``0006``; an index :func:`create` made has it already); True when it was added."""
    columns = {c["name"] for c in sa.inspect(conn).get_columns(DOCS)}
    if REPEATS in columns:
        return False
    conn.exec_driver_sql(f"ALTER TABLE {DOCS} ADD COLUMN {REPEATS} TEXT NOT NULL DEFAULT ''")
    return True


def drop_repeats(conn: Connection) -> None:
    """Drop ``search_docs.repeats`` again (migration ``0006``'s downgrade)."""
    conn.exec_driver_sql(f"ALTER TABLE {DOCS} DROP COLUMN {REPEATS}")


def bound_pending_list(conn: Connection) -> None:
    """Give the PostgreSQL index its small pending list (migration ``0007``; an index
    :func:`create` made has it already). SQLite's FTS5 has no such list: nothing to do."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"ALTER INDEX ix_{DOCS}_tsv SET ({_GIN_OPTIONS})")


def no_pending_list(conn: Connection) -> None:
    """Index every entry directly again, as before migration ``0007`` (its downgrade): the
    pending list is merged into the index first, so no entry is left unsearched there."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT gin_clean_pending_list('ix_{DOCS}_tsv'::regclass)")
        conn.exec_driver_sql(f"ALTER INDEX ix_{DOCS}_tsv SET (fastupdate = off)")
        conn.exec_driver_sql(f"ALTER INDEX ix_{DOCS}_tsv RESET (gin_pending_list_limit)")


def drop(conn: Connection) -> None:
    """Drop them again (the migration's downgrade)."""
    names = (CONFIG, STATS, DOCS) if conn.dialect.name == "postgresql" else (FTS, STATS, DOCS)
    for name in names:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")


def is_index_object(name: str | None, type_: str, parent_names: Any = None) -> bool:
    """Whether a schema object belongs to the search index (Alembic ``include_name`` shape:
    comparisons against ``metadata`` pass ``not is_index_object(...)``)."""
    if type_ == "table":
        return name in TABLES
    if type_ in ("index", "unique_constraint", "foreign_key_constraint", "column"):
        table = (parent_names or {}).get("table_name")
        return table in TABLES
    return False


#: Scripts written without spaces between words; indexed as character n-grams.
_SPACELESS: Final = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
    r"\u30fc\u3005"  # the prolonged-sound and iteration marks (script Common)
)
_RUN: Final = regex.compile(rf"[{_SPACELESS}]+")
#: Among them, the scripts whose single characters are letters, not words: bigrams only.
_BIGRAM_ONLY: Final = regex.compile(r"[\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]")
_WORD: Final = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_FOLDABLE_MARKS: Final = regex.compile(r"([\p{Latin}\p{Greek}\p{Cyrillic}])\p{Mn}+")
#: :data:`_WORD` on ASCII text already case-folded: ASCII's letters and digits (most memory
#: text is ASCII, and this skips three Unicode normalisations and the spaceless-run scan).
_ASCII_WORD: Final = re.compile(r"[a-z0-9]+")

#: Longest indexed word: longer runs are noise (hashes, base64) and bloat the index.
MAX_WORD_CHARS: Final = 64
#: Most terms one query looks for: each costs one posting list; a pasted page is cut here.
MAX_QUERY_TERMS: Final = 32

#: English function words dropped from queries: "what did Melanie say" should rank by
#: "melanie" and "say", not tie every entry that contains "did". Kept small on purpose: a
#: query made only of these still searches for them.
_STOPWORD_TEXT: Final = """
    a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves"""
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class IndexText:
    """What the index holds for one entry: space-separated words and grams, its length in
    terms (BM25's document length), and ``key:count`` of each term it holds more than once
    (space-separated; see :func:`repeats_of`)."""

    words: str
    grams: str
    length: int
    repeats: str = ""


@dataclass(frozen=True)
class QueryTerms:
    """The distinct terms one query looks for, in query order."""

    words: tuple[str, ...]
    grams: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.words or self.grams)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.words, *self.grams)


def fold(text: str) -> str:
    """The normal form both index and query are cut from (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    decomposed = _FOLDABLE_MARKS.sub(r"\1", unicodedata.normalize("NFD", folded))
    return unicodedata.normalize("NFC", decomposed)


def _split(text: str) -> tuple[list[str], list[str]]:
    """(words, spaceless runs) of ``text``, in order."""
    if text.isascii():
        # ASCII is its own NFKC, NFD and NFC form, has no marks to drop and no spaceless
        # script, and case-folds as it lowers: the same words as below, found directly.
        words = _ASCII_WORD.findall(text.lower())
        return [w for w in words if len(w) <= MAX_WORD_CHARS], []
    return _split_unicode(text)


def _split_unicode(text: str) -> tuple[list[str], list[str]]:
    """:func:`_split` of any text, the ASCII shortcut aside."""
    folded = fold(text)
    runs = _RUN.findall(folded)
    spaced = _RUN.sub(" ", folded)
    words = [w for w in _WORD.findall(spaced) if len(w) <= MAX_WORD_CHARS]
    return words, runs


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def term_key(term: str) -> str:
    """The key under which an entry counts its repeats of ``term``: the word with an English
    plural ending folded (Harman's S-stemmer: "-ies" to "-y", "-es" to "-e", "-s" dropped,
    but not "-aies", "-eies", "-aes", "-ees", "-oes", "-us", "-ss"), so "raspberry" and
    "raspberries" are one term; an n-gram is its own key.

    The counts are kept in the index (both databases) and read by the ranking, not by the
    databases' own stemmers (Porter for FTS5, the configured one for PostgreSQL), so both
    rank alike; plurals are the inflection that repeats most within one sentence. A word the
    database's stemmer matches but this key does not ("run" and "running") counts once: the
    term frequency can only be underestimated, never invented.

    >>> [term_key(w) for w in ("berries", "horses", "cats", "bus", "glass", "北京")]
    ['berry', 'horse', 'cat', 'bus', 'glass', '北京']
    """
    if len(term) < 3 or term[-1] != "s":  # every rule below ends in "s"
        return term
    if len(term) > 3 and term.endswith("ies") and not term.endswith(("aies", "eies")):
        return term[:-3] + "y"
    if len(term) > 3 and term.endswith("es") and not term.endswith(("aes", "ees", "oes")):
        return term[:-1]
    if len(term) > 2 and term.endswith("s") and not term.endswith(("us", "ss")):
        return term[:-1]
    return term


def _repeats(words: list[str], grams: list[str]) -> str:
    counts: dict[str, int] = {}
    for term in (*map(term_key, words), *grams):
        counts[term] = counts.get(term, 0) + 1
    return " ".join(f"{key}:{n}" for key, n in counts.items() if n > 1)


def repeats_of(column: str) -> dict[str, int]:
    """The counts :class:`IndexText` ``.repeats`` holds, by :func:`term_key` (keys are words
    or n-grams: they hold neither spaces nor colons).

    >>> repeats_of("raspberry:2 北京:3"), repeats_of("")
    ({'raspberry': 2, '北京': 3}, {})
    """
    found: dict[str, int] = {}
    for item in column.split():
        key, _, count = item.rpartition(":")
        found[key] = int(count)
    return found


def index_text(text: str) -> IndexText:
    """What the index stores for an entry whose text is ``text``."""
    words, runs = _split(text)
    grams: list[str] = []
    for run in runs:
        if not _BIGRAM_ONLY.match(run) or len(run) == 1:
            grams.extend(run)
        grams.extend(_bigrams(run))
    return IndexText(
        " ".join(words), " ".join(grams), len(words) + len(grams), _repeats(words, grams)
    )


def query_terms(query: str) -> QueryTerms:
    """The terms to look for (see the module docstring); empty for a query with no letters."""
    words, runs = _split(query)
    kept = [w for w in words if w not in STOPWORDS] or words
    grams = [g for run in runs for g in (_bigrams(run) or [run])]
    unique_words = tuple(dict.fromkeys(kept))[:MAX_QUERY_TERMS]
    unique_grams = tuple(dict.fromkeys(grams))[: MAX_QUERY_TERMS - len(unique_words)]
    return QueryTerms(unique_words, unique_grams)


#: Length normalisation, lighter than the usual 0.75: entries are all about one sentence, so a
#: longer one is more specific rather than padded (LoCoMo recall@10 79.6% at 0.75, 79.9% at
#: 0.1-0.3 before term frequencies counted; with them 80.1% at 0.5-0.75, 80.3-80.4% at
#: 0.1-0.3, ``python -m bench search``).
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
#: number (prepared once per connection; an expanded ``IN`` list is a new statement for each
#: count, and its hundred parameters are rendered one by one for every query).
_DOC_ROWS_PG = sa.text(
    f"SELECT id, entry_id, doc_len, repeats FROM {DOCS} WHERE id = ANY(CAST(:ids AS bigint[]))"
)

#: Entries read per round trip while rebuilding the whole index.
REBUILD_CHUNK = 2000


def _backend(conn: Connection) -> ModuleType:
    # Imported here: each dialect module reads this module's tables and terms.
    from worker.store import search_postgres, search_sqlite

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

    Same result, fewer statements (a batch's commit is the hot path): the texts and validity
    come from ``new`` and ``changed`` (the values just written, so nothing is read back), and
    a brand-new entry skips the delete and the vector lookup: its id did not exist in the
    namespace before this transaction (the entries' primary key), and the index and the
    vectors only ever hold active entries, so neither has a row of it. A changed entry is
    taken out first, as :func:`sync_entries` does.
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
    from worker.store import search_postgres

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
    fetched, up to that many: if there are no more, all of them are candidates, ranked
    exactly. The others are *common* (a speaker's name in all their memories, a word in every
    other entry): they count for the window's entries, their document frequency estimated
    from it. Exact among the entries holding a rare term, then; the newest entries are the
    candidates of common terms.
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
