"""The store's one transaction helper: every store method is one read or write transaction.

Database failures become :class:`~worker.errors.StoreUnavailable` naming what failed (and that
nothing was written); memworker's own errors pass through. Either way the transaction is rolled
back, so nothing is half-written. The store's method groups (the repositories mixed into
:class:`~worker.store.memory.MemoryStore`) build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from worker.errors import MemworkerError, StoreUnavailable
from worker.store import clock as _clock
from worker.store import migrate as _migrate
from worker.store.engine import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
    create_store_engine,
    read_transaction,
    write_transaction,
)

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
            _migrate.upgrade(engine)
        _migrate.check_migrated(engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


class Transactions:
    """An engine and the transactions over it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    @contextmanager
    def _tx(self, *, write: bool, what: str, snapshot: bool = False) -> Iterator[Connection]:
        # Database failures become StoreError; our own errors pass through. Either way the
        # transaction is rolled back, so nothing is half-written.
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
        processes compare (see :mod:`worker.store.clock`)."""
        return self._read("reading the database clock", _clock.db_now)
