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
from worker.store.engine import read_transaction, write_transaction

T = TypeVar("T")


class Transactions:
    """An engine and the transactions over it."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    @contextmanager
    def _tx(self, *, write: bool, what: str) -> Iterator[Connection]:
        # Database failures become StoreError; our own errors pass through. Either way the
        # transaction is rolled back, so nothing is half-written.
        try:
            with (write_transaction if write else read_transaction)(self.engine) as conn:
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

    def _write(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self._tx(write=True, what=what) as conn:
            return fn(conn)

    def db_now(self) -> datetime:
        """The database server's current time: the clock of every SQL-side time that two
        processes compare (see :mod:`worker.store.clock`)."""
        return self._read("reading the database clock", _clock.db_now)
