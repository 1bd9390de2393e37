"""The search index's tables: the one place that knows each dialect's full-text DDL.

They are not in :data:`worker.store.schema.metadata` (SQLAlchemy cannot describe an FTS5
table or a GIN index portably); migration ``0004`` creates them with :func:`create`, and
schema comparisons leave them out through :func:`is_index_object`.

* **SQLite**: ``search_docs`` maps each indexed (active) entry to the rowid of its row in
  ``search_fts``, an FTS5 table with three columns: ``ns`` (one token naming the namespace,
  so a query intersects with it inside the index), ``words`` and ``grams`` (see
  :mod:`worker.store.search_text`). Tokenizer: porter over unicode61 with diacritics removed
  and combining marks kept inside tokens (Devanagari and Thai vowel signs are marks).
* **PostgreSQL**: ``search_docs`` holds each indexed entry's ``tsvector`` (GIN-indexed) and
  length; ``search_stats`` the number and total length of a namespace's indexed entries (BM25's
  ``N`` and ``avgdl``, kept by the same transactions); ``search_config`` the one text-search
  configuration the vectors were built with.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy.engine import Connection

from worker.constants import MAX_ID_LENGTH

DOCS: Final = "search_docs"
FTS: Final = "search_fts"
STATS: Final = "search_stats"
CONFIG: Final = "search_config"

#: The configuration a new PostgreSQL index is built with (``MEMWORKER_TEXT_SEARCH_CONFIG``
#: changes it through :func:`worker.store.search_index.configure`).
DEFAULT_CONFIG: Final = "english"

FTS_TOKENIZER: Final = "porter unicode61 remove_diacritics 2 categories 'L* N* Co M*'"

_SQLITE: Final = (
    f"""CREATE TABLE {DOCS} (
        id INTEGER PRIMARY KEY,
        namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
        entry_id VARCHAR({MAX_ID_LENGTH}) NOT NULL,
        CONSTRAINT uq_{DOCS}_namespace_id_entry_id UNIQUE (namespace_id, entry_id)
    )""",
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(ns, words, grams, tokenize="{FTS_TOKENIZER}")""",
)

_POSTGRES: Final = (
    f"""CREATE TABLE {DOCS} (
        id BIGSERIAL PRIMARY KEY,
        namespace_id BIGINT NOT NULL REFERENCES namespaces (id) ON DELETE CASCADE,
        entry_id VARCHAR({MAX_ID_LENGTH}) NOT NULL,
        doc_len INTEGER NOT NULL,
        tsv TSVECTOR NOT NULL,
        CONSTRAINT uq_{DOCS}_namespace_id_entry_id UNIQUE (namespace_id, entry_id)
    )""",
    f"CREATE INDEX ix_{DOCS}_tsv ON {DOCS} USING gin (tsv)",
    f"""CREATE TABLE {STATS} (
        namespace_id BIGINT PRIMARY KEY REFERENCES namespaces (id) ON DELETE CASCADE,
        docs BIGINT NOT NULL,
        total_len BIGINT NOT NULL
    )""",
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


def drop(conn: Connection) -> None:
    """Drop them again (the migration's downgrade)."""
    names = (CONFIG, STATS, DOCS) if conn.dialect.name == "postgresql" else (FTS, DOCS)
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
