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

import contextlib
import math
import os
import socket
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from worker.errors import StoreRefused
from worker.store.deadline import Watchdog

#: How long a SQLite writer waits for the write lock. Commits hold it for milliseconds; 30 s
#: only trips when a process is stuck holding a transaction open.
SQLITE_BUSY_TIMEOUT_MS: Final = 30_000

#: Age in seconds after which a pooled PostgreSQL connection is replaced at checkout. It stands
#: in for a ping before every transaction (a round trip each): a connection the server or the
#: network dropped fails its transaction, which the pipeline retries, and SQLAlchemy then
#: invalidates the whole pool; recycling before the usual 5-10 minute idle cut-offs of NAT
#: gateways and load balancers keeps that from happening to connections that were merely idle.
PG_POOL_RECYCLE_SECONDS: Final = 240

#: Default PostgreSQL connect timeout: a reachable server answers in milliseconds; this only
#: trips when it is down or a firewall drops the packets.
DEFAULT_CONNECT_TIMEOUT_SECONDS: Final = 5.0
#: Default longest transaction. A batch commits in milliseconds; 30 s only trips on a stuck
#: server, lock or network, and then the batch is retried instead of pinning its namespace.
DEFAULT_TRANSACTION_TIMEOUT_SECONDS: Final = 30.0
#: The client-side deadline of a transaction is this much longer than the server's
#: ``statement_timeout`` (or twice it, when shorter), so a live server reports its own,
#: clearer error first.
CLIENT_DEADLINE_GRACE_SECONDS: Final = 5.0

#: Execution option marking a connection whose transactions write (``BEGIN IMMEDIATE``).
_WRITE_OPTION: Final = "memworker_write"
#: Execution options of a PostgreSQL read transaction that sees one snapshot.
#: The PostgreSQL driver memworker ships with (psycopg 3). A bare ``postgres://`` or
#: ``postgresql://`` URL, as hosting providers and ``psql`` print them, means this driver: on its
#: own SQLAlchemy would pick psycopg2 (not installed) or refuse ``postgres`` as unknown.
PG_DRIVER: Final = "postgresql+psycopg"
#: Spellings of a URL's scheme that name PostgreSQL without a driver.
_BARE_PG_SCHEMES: Final = frozenset({"postgres", "postgresql"})

_PG_SNAPSHOT: Final = {"isolation_level": "REPEATABLE READ", "postgresql_readonly": True}


@dataclass(frozen=True)
class Deadline:
    """How long one transaction may take, and the watchdog that enforces it client-side."""

    seconds: float
    watchdog: Watchdog = field(default_factory=Watchdog)


#: The client deadline of each server engine (SQLite engines have none).
_DEADLINES: weakref.WeakKeyDictionary[Engine, Deadline] = weakref.WeakKeyDictionary()


def create_store_engine(
    url: str,
    *,
    create_dirs: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    transaction_timeout: float = DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
) -> Engine:
    """An engine for ``url`` with the pragmas and transaction behaviour the store relies on.

    ``create_dirs`` makes the parent folder of a SQLite file (embedded mode's first start).
    On PostgreSQL, ``connect_timeout`` bounds connecting and ``transaction_timeout`` becomes
    the server's ``statement_timeout`` (and, with a little grace, the client deadline that
    :func:`transaction_deadline` enforces).
    """
    try:
        parsed = with_driver(sa.engine.make_url(url))
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
        timeout_ms = int(transaction_timeout * 1000)
        # Keep options the URL itself carries (e.g. ``?options=-csearch_path=…``).
        given = parsed.query.get("options", "")
        given = " ".join(given) if isinstance(given, tuple) else given
        options = (
            f"{given} -c statement_timeout={timeout_ms} "
            f"-c idle_in_transaction_session_timeout={timeout_ms * 2}"
        ).strip()
        engine = sa.create_engine(
            parsed,
            pool_recycle=PG_POOL_RECYCLE_SECONDS,
            # Waiting for a pooled connection is bounded like connecting.
            pool_timeout=connect_timeout,
            connect_args={
                "connect_timeout": max(1, math.ceil(connect_timeout)),
                "options": options,
            },
        )
        grace = min(CLIENT_DEADLINE_GRACE_SECONDS, transaction_timeout)
        _DEADLINES[engine] = Deadline(transaction_timeout + grace)
        return engine
    raise StoreRefused(
        f"database URL scheme {parsed.drivername!r} is not supported; use sqlite:///<file> or "
        "postgresql://user@host/db (postgres:// and postgresql+psycopg:// alike)"
    )


def with_driver(url: sa.engine.URL) -> sa.engine.URL:
    """``url`` with the PostgreSQL driver named (:data:`PG_DRIVER`) when it names none.

    >>> with_driver(sa.engine.make_url("postgres://mw@db:5432/mw")).drivername
    'postgresql+psycopg'
    >>> with_driver(sa.engine.make_url("sqlite:///x.db")).drivername
    'sqlite'
    """
    if url.drivername in _BARE_PG_SCHEMES:
        return url.set(drivername=PG_DRIVER)
    return url


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
        with transaction_deadline(engine, conn), conn.begin():
            yield conn


@contextmanager
def read_transaction(engine: Engine, *, snapshot: bool = False) -> Iterator[Connection]:
    """One read-only transaction.

    ``snapshot=True``: every statement of it sees one snapshot. PostgreSQL's default (read
    committed) gives each statement its own, so there the transaction is ``REPEATABLE READ
    READ ONLY``, set on the driver's connection before it begins: the ``BEGIN`` itself carries
    it (no ``SET TRANSACTION`` round trip), and SQLAlchemy restores the connection's defaults
    when it goes back to the pool. A SQLite transaction is a snapshot already.
    """
    with engine.connect() as conn:
        if snapshot and engine.dialect.name == "postgresql":
            conn.execution_options(**_PG_SNAPSHOT)
        with transaction_deadline(engine, conn), conn.begin():
            yield conn


@contextmanager
def transaction_deadline(engine: Engine, conn: Connection) -> Iterator[None]:
    """Cut the connection off if the block (the whole transaction, commit included) runs past
    the engine's deadline; a no-op for SQLite, whose waits are bounded by its busy timeout."""
    deadline = _DEADLINES.get(engine)
    if deadline is None:
        yield
        return
    dbapi = conn.connection.dbapi_connection
    with deadline.watchdog.guard(lambda: _shut_socket(dbapi), seconds=deadline.seconds):
        yield


def _shut_socket(dbapi_connection: Any) -> None:
    """Shut the driver's socket down: a call blocked on it fails at once with a disconnect,
    and SQLAlchemy drops the connection from the pool."""
    fd = dbapi_connection.fileno()
    with contextlib.closing(socket.socket(fileno=os.dup(fd))) as sock:
        sock.shutdown(socket.SHUT_RDWR)


def dialect_insert(conn: Connection, table: sa.Table) -> Any:
    """The dialect's INSERT (with ``on_conflict_do_nothing`` / ``on_conflict_do_update``)."""
    return dialect_insert_for(conn.dialect.name, table)


def dialect_insert_for(dialect: str, table: sa.Table) -> Any:
    """:func:`dialect_insert` by the dialect's name (for statements built once per dialect)."""
    # Imported here, from the dialect in use: a store on SQLite never loads PostgreSQL's
    # dialect (a tenth of SQLAlchemy's import), nor one on PostgreSQL SQLite's.
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)
