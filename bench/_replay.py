"""The physical limit of a consolidation's writes: the same rows, written by plain SQL.

:func:`capture` reads back every row the pipeline left for some namespaces (the namespace row,
its ledger, entries, files and file versions, outbox rows, vectors, search documents and, on
SQLite, their full-text rows), grouped by namespace: one group per batch, since the bench gives
each user one batch. :func:`replay` writes each group into an empty, migrated database of the
same kind in one write transaction, through the store's own engine settings: SQLAlchemy Core
``executemany`` per table, nothing read, nothing decided. Its rate is the most a pipeline that
writes these rows one transaction per batch could reach.

A table's rows belong to a namespace through a ``namespace_id`` column, the namespace's key (a
run), or a foreign key to a row that does (a file version through its file); the SQLite
full-text rows through their document's id (their rowid).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import sqlalchemy as sa

from worker.store.engine import write_transaction
from worker.store.search_text import DOCS, FTS, TABLES

#: Tables a migrated database fills itself, or that FTS5 maintains: never replayed.
_SKIPPED: Final = (TABLES - {DOCS, "search_stats"}) | {"alembic_version"}


@dataclass
class Captured:
    """Rows per namespace id, per table (in foreign-key order), and the full-text rows."""

    tables: list[sa.Table]
    rows: dict[int, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    fts: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        plain = sum(len(r) for group in self.rows.values() for r in group.values())
        return plain + sum(len(r) for r in self.fts.values())


def capture(engine: sa.Engine, namespace_ids: Collection[int]) -> Captured:
    """Every row of ``namespace_ids`` in ``engine``'s database, grouped by namespace."""
    metadata = sa.MetaData()
    names = [n for n in sa.inspect(engine).get_table_names() if n not in _SKIPPED]
    metadata.reflect(bind=engine, only=names)
    tables = list(metadata.sorted_tables)
    owner: dict[tuple[str, str, Any], int] = {}  # (table, column, value) -> namespace id
    wanted = set(namespace_ids)
    found = Captured(tables)
    # The columns rows are found through: those a foreign key names, and the documents' ids.
    referenced = {(fk.column.table.name, fk.column.name) for t in tables for fk in t.foreign_keys}
    referenced |= {(DOCS, "id"), ("namespaces", "key")}
    with engine.connect() as conn:
        for table in tables:
            for row in conn.execute(sa.select(table)).mappings():
                ns = _namespace_of(table, dict(row), owner)
                if ns is None:
                    continue
                for t_name, column in referenced:
                    if t_name == table.name:
                        owner[(table.name, column, row[column])] = ns
                if ns in wanted:
                    found.rows.setdefault(ns, defaultdict(list))[table.name].append(dict(row))
        if engine.dialect.name == "sqlite":
            query = f"SELECT rowid, words, grams FROM {FTS}"
            for rowid, words, grams in conn.exec_driver_sql(query):
                ns = owner.get((DOCS, "id", rowid))
                if ns in wanted:
                    found.fts.setdefault(ns, []).append((rowid, words, grams))
    return found


def _namespace_of(
    table: sa.Table, row: dict[str, Any], owner: dict[tuple[str, str, Any], int]
) -> int | None:
    if table.name == "namespaces":
        return int(row["id"])
    if row.get("namespace_id") is not None:
        return int(row["namespace_id"])
    if isinstance(row.get("namespace"), str):  # a run names its namespace by key
        return owner.get(("namespaces", "key", row["namespace"]))
    for fk in table.foreign_keys:
        ns = owner.get((fk.column.table.name, fk.column.name, row[fk.parent.name]))
        if ns is not None:
            return ns
    return None


def replay(engine: sa.Engine, captured: Captured, groups: Iterable[int]) -> int:
    """Write each group of ``captured`` into ``engine``'s database, one transaction a group;
    the rows written."""
    written = 0
    fts_insert = f"INSERT INTO {FTS} (rowid, words, grams) VALUES (?, ?, ?)"
    for ns in groups:
        rows = captured.rows.get(ns, {})
        with write_transaction(engine) as conn:
            for table in captured.tables:
                if rows.get(table.name):
                    conn.execute(sa.insert(table), rows[table.name])
                    written += len(rows[table.name])
            if captured.fts.get(ns):
                conn.exec_driver_sql(fts_insert, captured.fts[ns])
                written += len(captured.fts[ns])
    return written
