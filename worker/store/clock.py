"""The database's clock: the one authority for every SQL-side time two processes compare.

Outbox retries (``next_attempt_at``), claim leases (``claim_expires_at``), the sink breakers'
``open_until`` and run rows are written by one worker host and read by others; a host whose
clock is a day fast must not open a breaker until tomorrow for everybody, and a slow one must
not see live claims as expired. So these times are read from the database server, in the
transaction that writes or compares them: PostgreSQL's ``now()`` (the transaction's start,
one value per transaction), SQLite's ``'now'`` with milliseconds (``CURRENT_TIMESTAMP`` has
whole seconds only). An embedded SQLite file is on one host, so its clock is that host's; the
worker's Python clock (and anything a test patches there) still decides nothing.

Functions take ``now=None`` for the database's clock; a datetime passed instead is a test's
injected time (or a caller that already read the database's clock) and is used as given.

>>> import sqlalchemy as sa
>>> engine = sa.create_engine("sqlite://")
>>> with engine.connect() as conn:
...     db_now(conn).tzinfo is not None
True
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store.sqltypes import require_utc

#: SQLite's clock with milliseconds, in the text format the datetime columns store.
_SQLITE_NOW_FORMAT = "%Y-%m-%d %H:%M:%f"


def clock_column(dialect: str) -> sa.ColumnElement[Any]:
    """The database's clock as a column, to read it with another query (a statement fewer
    than :func:`db_now`); :func:`clock_value` turns what it returns into a datetime."""
    if dialect == "sqlite":
        return sa.func.strftime(_SQLITE_NOW_FORMAT, "now", type_=sa.String)
    return sa.func.now()


def clock_value(value: object) -> datetime:
    """A value of :func:`clock_column`, timezone-aware UTC."""
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def db_now(conn: Connection) -> datetime:
    """The database server's current time, timezone-aware UTC."""
    return clock_value(conn.execute(sa.select(clock_column(conn.dialect.name))).scalar_one())


def resolve(conn: Connection, now: datetime | None, what: str = "now") -> datetime:
    """``now`` in UTC when given (an injected time), else the database's clock."""
    return db_now(conn) if now is None else require_utc(now, what)
