"""Engines for the memory store: SQLite (embedded default) and PostgreSQL (production).

SQLite gets WAL (readers never block the writer), enforced foreign keys, a busy timeout, and
``BEGIN IMMEDIATE`` for write transactions: the write lock is taken up front, so two writers
queue on the busy timeout instead of both reading, then one failing with "database is locked"
when it upgrades its lock. Reads keep a plain deferred ``BEGIN``.

>>> engine = create_store_engine("sqlite://")
>>> with write_transaction(engine) as conn:
...     conn.exec_driver_sql("PRAGMA foreign_keys").scalar()
1
>>> engine.dispose()
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from worker.errors import StoreRefused

#: How long a SQLite writer waits for the write lock. Commits hold it for milliseconds; 30 s
#: only trips when a process is stuck holding a transaction open.
SQLITE_BUSY_TIMEOUT_MS: Final = 30_000

#: Age in seconds after which a pooled PostgreSQL connection is replaced at checkout. It stands
#: in for a ping before every transaction (a round trip each): a connection the server or the
#: network dropped fails its transaction, which the pipeline retries, and SQLAlchemy then
#: invalidates the whole pool; recycling before the usual 5-10 minute idle cut-offs of NAT
#: gateways and load balancers keeps that from happening to connections that were merely idle.
PG_POOL_RECYCLE_SECONDS: Final = 240

#: Execution option marking a connection whose transactions write (``BEGIN IMMEDIATE``).
_WRITE_OPTION: Final = "memworker_write"


def create_store_engine(url: str, *, create_dirs: bool = False) -> Engine:
    """An engine for ``url`` with the pragmas and transaction behaviour the store relies on.

    ``create_dirs`` makes the parent folder of a SQLite file (embedded mode's first start).
    """
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise StoreRefused(f"database URL {url!r} is not a SQLAlchemy URL: {exc}") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if create_dirs and parsed.database and parsed.database != ":memory:":
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(parsed)
        _configure_sqlite(engine)
        return engine
    if backend == "postgresql":
        return sa.create_engine(parsed, pool_recycle=PG_POOL_RECYCLE_SECONDS)
    raise StoreRefused(
        f"database URL scheme {parsed.drivername!r} is not supported; use sqlite:///<file> or "
        "postgresql+psycopg://user@host/db"
    )


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves (pysqlite's implicit BEGIN is deferred and late).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            # Durable at each checkpoint, not each commit: WAL's recommended trade-off.
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction: committed on success, rolled back (nothing written) on error."""
    with engine.connect() as conn:
        conn.execution_options(**{_WRITE_OPTION: True})
        with conn.begin():
            yield conn


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """One read-only transaction: a consistent snapshot of several queries."""
    with engine.connect() as conn, conn.begin():
        yield conn


def dialect_insert(conn: Connection, table: sa.Table) -> Any:
    """The dialect's INSERT (with ``on_conflict_do_nothing`` / ``on_conflict_do_update``)."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)
