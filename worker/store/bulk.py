"""Multi-row inserts: a batch's rows in one ``INSERT … VALUES (…), (…)`` statement.

An ``executemany`` still runs one statement per row on the server (psycopg pipelines them, but
PostgreSQL parses, plans and executes each); one multi-row statement is one execution.
SQLAlchemy writes such statements itself ("insertmanyvalues", its compiled form cached, pages
of a thousand rows) for an executemany ``INSERT … RETURNING``, so that is what this asks for on
PostgreSQL, ignoring what comes back. SQLite runs its ``executemany`` in C over one prepared
statement, which is as fast, so it keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def insert_rows(conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) into ``table``: multi-row statements on
    PostgreSQL, one executemany elsewhere."""
    if not rows:
        return
    stmt = sa.insert(table)
    if conn.dialect.name == "postgresql":
        stmt = stmt.returning(*table.primary_key.columns)
    conn.execute(stmt, list(rows)).close()
