"""Inserting a batch's rows: one ``executemany``, which costs one round trip on both databases.

On PostgreSQL psycopg sends an ``executemany`` in pipeline mode (every row's parameters in one
round trip) to a statement it prepared once per connection, so the server neither parses nor
plans it again. A multi-row ``INSERT … VALUES (…), (…)`` (SQLAlchemy's "insertmanyvalues",
what an ``INSERT … RETURNING`` executemany becomes) was measured slower for a batch of 40:
its text grows with the rows (16 columns × 40 rows of placeholders for entries), too long for
psycopg's cache of converted queries, so every batch re-parsed it client-side (about twice the
CPU of the pipelined executemany: 5 ms against 2.5 ms for 40 entries), and the server plans
each such statement anew. SQLite runs its ``executemany`` in C over one prepared statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def insert_rows(conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert ``rows`` (dicts with the same keys) into ``table``: one executemany."""
    if rows:
        conn.execute(sa.insert(table), list(rows))
