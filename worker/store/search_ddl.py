"""The search index's tables: the one place that knows each dialect's full-text DDL.

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
  table of two columns, ``words`` and ``grams`` (see :mod:`worker.store.search_text`). Ids are
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
"""

from __future__ import annotations

from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.constants import MAX_ID_LENGTH

DOCS: Final = "search_docs"
FTS: Final = "search_fts"
STATS: Final = "search_stats"
CONFIG: Final = "search_config"
#: The column of ``search_docs`` holding an entry's repeated terms.
REPEATS: Final = "repeats"

#: The configuration a new PostgreSQL index is built with (``MEMWORKER_TEXT_SEARCH_CONFIG``
#: changes it through :func:`worker.store.search_index.configure`).
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
