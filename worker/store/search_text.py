"""The search index's side of the schema: its tables (each dialect's full-text DDL), and the
text it holds for an entry and looks for in a query. Below the index (:mod:`worker.store.search`)
and both dialects' modules, which read it.

**Tables.** They are not in :data:`worker.store.schema.metadata` (SQLAlchemy cannot describe an
FTS5 table or a GIN index portably); migration ``0004`` creates them with :func:`create`, and
schema comparisons leave them out through :func:`is_index_object`. ``search_docs`` has a row per
active entry with its length in terms and its repeated terms (BM25's document length and term
frequency); ``search_stats`` a namespace's entry count and total length (BM25's ``N`` and
average length) and a counter every change of its vectors moves (so a search can keep the
vectors in memory between queries).

* **SQLite**: ``search_docs.id`` is the rowid of the entry's row in ``search_fts``, an FTS5
  table of two columns, ``words`` and ``grams``. Ids are ``namespace id << 32 | sequence``: a
  namespace is one rowid range, which FTS5 seeks to inside its index (no filter per row), and
  its newest entries are the top of that range. Tokenizer: porter over unicode61, diacritics
  removed, combining marks kept inside tokens (Devanagari and Thai vowel signs are marks).
* **PostgreSQL**: ``search_docs.tsv`` holds the entry's ``tsvector``, GIN-indexed with a small
  pending list (:data:`GIN_PENDING_LIST_KB`); ``(namespace_id, id)`` is indexed for a
  namespace's newest entries; ``search_config`` names the text-search configuration used.

**Text.** Index and query share one normal form, so they always agree: NFKC, case-folded,
Latin, Greek and Cyrillic diacritics removed ("café" finds "cafe"), then cut into

* **words**: runs of letters with their combining marks and digits (``\\p{L}\\p{M}\\p{N}``,
  so Devanagari vowel signs stay inside their word), for scripts that space their words;
* **grams** for scripts that do not (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer,
  Myanmar), where a tokenizer would keep a whole clause as one token: an entry indexes each
  run's characters and bigrams (Thai-like scripts: bigrams only, a single letter says
  nothing); a query looks for the bigrams of its runs (a one-character run: itself), so
  "北京" finds "我住在北京".

A query's words lose English stopwords, unless nothing would be left. Terms are plain strings:
the backends quote them, so no query text is ever read as search syntax.

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
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Final

import regex
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.types import MAX_ID_LENGTH

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

#: Cap of the GIN index's pending list, in kB: PostgreSQL's smallest. Commits append entries
#: there and the one that fills it merges them in one sorted pass (cheaper than indexing each);
#: every query scans the list, so it stays small (the 4 MB default would hold thousands).
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
#: :data:`_WORD` on case-folded ASCII, its letters and digits (most memory text is ASCII; this
#: skips the Unicode normalisations and the spaceless-run scan).
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
    plural ending folded (Harman's S-stemmer), so "raspberry" and "raspberries" are one term;
    an n-gram is its own key.

    The ranking reads these counts, not the databases' own stemmers, so both databases rank
    alike. A word only the database's stemmer matches ("run", "running") counts once: the
    term frequency can be underestimated, never invented.

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
