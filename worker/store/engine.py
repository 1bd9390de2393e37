"""Reaching the database: engines, its clock, a deadline for every transaction, prebuilt
statements.

**A client-side deadline.** PostgreSQL's ``statement_timeout`` cannot help when the server, or
the network in between, stops answering (a stopped backend, a proxy that never forwards, a
half-dead NAT): the driver waits on its socket forever, and a worker's heartbeat keeps the
namespace's lease alive as long. The :class:`Watchdog` shuts a late transaction's socket down:
the blocked call fails at once, the pool discards the connection, and the caller sees
:class:`~worker.errors.StoreUnavailable` (nothing was committed).

>>> dog = Watchdog()
>>> with dog.guard(lambda: None, seconds=5.0):
...     pass
>>> dog.expired
0

**Engines.** SQLite gets WAL (readers never block the writer), enforced foreign keys, a busy
timeout, and ``BEGIN IMMEDIATE`` for write transactions: the write lock is taken up front, so
two writers queue on the busy timeout instead of one failing with "database is locked" when it
upgrades its lock. Reads keep a plain deferred ``BEGIN``.

>>> engine = create_store_engine("sqlite://")
>>> with write_transaction(engine) as conn:
...     conn.exec_driver_sql("PRAGMA foreign_keys").scalar()
1
>>> engine.dispose()

**The database's clock** decides every SQL-side time that two processes compare (outbox retries
and claims, breakers, run rows), so a host whose clock is a day fast cannot open a breaker until
tomorrow for everybody. It is read in the transaction that writes or compares the time:
PostgreSQL's ``now()`` (the transaction's start), SQLite's ``'now'`` with milliseconds.
Functions take ``now=None`` for it; a datetime passed instead (a test's injected time) is used
as given.

>>> import sqlalchemy as sa
>>> engine = sa.create_engine("sqlite://")
>>> with engine.connect() as conn:
...     db_now(conn).tzinfo is not None
True

**Prebuilt statements.** Building a SQLAlchemy Core statement costs several times the client CPU
of running it, so those every batch and delivery runs are built once, with named parameters
(:func:`param`); one whose shape depends on the dialect or on optional values is built once per
shape by a cached function.

>>> import sqlalchemy as sa
>>> t = sa.Table("t", sa.MetaData(), sa.Column("id", sa.Integer), sa.Column("name", sa.String))
>>> str(sa.select(t.c.name).where(t.c.id == param(t.c.id, "t_id")))
'SELECT t.name \\nFROM t \\nWHERE t.id = :t_id'
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from worker.errors import MemworkerError, StoreRefused, StoreUnavailable
from worker.store import schema as _schema
from worker.types import require_utc

log = logging.getLogger(__name__)


class Watchdog:
    """One daemon thread that calls ``on_expiry`` of each guard whose deadline passes."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int]] = []
        self._live: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        #: How many guards expired (their transaction was cut off).
        self.expired = 0

    @contextmanager
    def guard(self, on_expiry: Callable[[], None], *, seconds: float) -> Iterator[None]:
        """Run the block; if it is still running after ``seconds``, call ``on_expiry`` (from
        the watchdog's thread) to make it fail."""
        token = next(self._ids)
        with self._wake:
            self._live[token] = on_expiry
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            self._start()
            # The thread sleeps until the earliest deadline; only a new earliest one (every
            # transaction's deadline is usually the same length, so rarely) needs it awake.
            if self._heap[0][1] == token:
                self._wake.notify()
        try:
            yield
        finally:
            with self._wake:
                self._live.pop(token, None)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="sql-deadline", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._heap and self._heap[0][1] not in self._live:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._wake.wait()
                    continue
                due, token = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                on_expiry = self._live.pop(token)
                self.expired += 1
            try:
                on_expiry()
            except Exception:  # the connection may already be gone; nothing else to do
                log.debug("cutting off an expired SQL transaction failed", exc_info=True)


#: How long a SQLite writer waits for the write lock. Commits hold it for milliseconds; 30 s
#: only trips when a process is stuck holding a transaction open.
SQLITE_BUSY_TIMEOUT_MS: Final = 30_000

#: Age in seconds after which a pooled PostgreSQL connection is replaced at checkout, instead of
#: a ping before every transaction: under the usual 5-10 minute idle cut-offs of NAT gateways and
#: load balancers, so a merely idle connection is not dropped (a dropped one fails its
#: transaction, and SQLAlchemy then invalidates the whole pool).
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
#: The PostgreSQL driver memworker ships with (psycopg 3). A bare ``postgres://`` or
#: ``postgresql://`` URL, as hosting providers and ``psql`` print them, means this driver: on its
#: own SQLAlchemy would pick psycopg2 (not installed) or refuse ``postgres`` as unknown.
PG_DRIVER: Final = "postgresql+psycopg"
#: Spellings of a URL's scheme that name PostgreSQL without a driver.
_BARE_PG_SCHEMES: Final = frozenset({"postgres", "postgresql"})

#: Execution options of a PostgreSQL read transaction that sees one snapshot.
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

    ``snapshot=True``: every statement of it sees one snapshot. On PostgreSQL (read committed
    by default) the transaction is then ``REPEATABLE READ READ ONLY``, carried by its ``BEGIN``
    (no ``SET TRANSACTION`` round trip); SQLAlchemy restores the connection's defaults when it
    goes back to the pool. A SQLite transaction is a snapshot already.
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
    # Imported here: a store on SQLite never loads PostgreSQL's dialect, nor the reverse.
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


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


T = TypeVar("T")


def open_engine(
    url: str,
    *,
    create: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
    transaction_timeout: float = DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
) -> Engine:
    """The engine of the store at ``url``, checked to be migrated.

    ``create=True`` migrates the database to the newest schema first (embedded mode);
    otherwise a database that is not migrated raises :class:`~worker.errors.SchemaOutOfDate`
    telling you to run ``memworker db upgrade``. The timeouts bound a PostgreSQL connect and
    each transaction (see :func:`worker.store.engine.create_store_engine`).
    """
    engine = create_store_engine(
        url,
        create_dirs=create,
        connect_timeout=connect_timeout,
        transaction_timeout=transaction_timeout,
    )
    try:
        if create:
            _schema.upgrade(engine)
        _schema.check_migrated(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


class Transactions:
    """An engine and the transactions over it: each store method is one, and a database failure
    becomes :class:`~worker.errors.StoreUnavailable` naming what failed (nothing written)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    @contextmanager
    def _tx(self, *, write: bool, what: str, snapshot: bool = False) -> Iterator[Connection]:
        # Database failures become StoreUnavailable, our own errors pass through; both roll back.
        try:
            opened = (
                write_transaction(self.engine)
                if write
                else read_transaction(self.engine, snapshot=snapshot)
            )
            with opened as conn:
                yield conn
        except MemworkerError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            detail = getattr(exc, "orig", None) or exc
            raise StoreUnavailable(
                f"{what} failed and was rolled back (nothing was written): {detail}"
            ) from exc

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self._tx(write=False, what=what) as conn:
            return fn(conn)

    def _snapshot_read(self, what: str, fn: Callable[[Connection], T]) -> T:
        """:meth:`_read` whose statements all see one snapshot (see
        :func:`~worker.store.engine.read_transaction`)."""
        with self._tx(write=False, what=what, snapshot=True) as conn:
            return fn(conn)

    def _write(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self._tx(write=True, what=what) as conn:
            return fn(conn)

    def db_now(self) -> datetime:
        """The database server's current time: the clock of every SQL-side time that two
        processes compare (see :mod:`worker.store.engine`)."""
        return self._read("reading the database clock", db_now)


def param(column: sa.ColumnElement[Any], name: str, *, expanding: bool = False) -> Any:
    """A named parameter typed as ``column`` (so its type's bind processing applies, e.g. UTC
    checks on times); ``expanding``: a list for ``IN``."""
    return sa.bindparam(name, type_=column.type, expanding=expanding)
