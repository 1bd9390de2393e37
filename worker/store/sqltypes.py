"""Column types that behave the same on SQLite and PostgreSQL.

Datetimes go in and come out timezone-aware in UTC on both databases. PostgreSQL stores
``timestamptz`` (and hands back the session's zone, which we convert); SQLite has no datetime
type at all, so values are stored as naive UTC text in one fixed format — which also makes
lexicographic comparison in SQL (``next_attempt_at <= :now``) equal to time comparison.

>>> from datetime import UTC, datetime, timedelta, timezone
>>> t = UTCDateTime()
>>> t.process_bind_param(datetime(2025, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))), None)
datetime.datetime(2025, 1, 1, 10, 0, tzinfo=datetime.timezone.utc)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from worker.errors import StoreRefused


def require_utc(value: datetime, what: str) -> datetime:
    """Return ``value`` in UTC; a naive datetime is refused because its zone is a guess.

    >>> from datetime import UTC, datetime
    >>> require_utc(datetime(2025, 1, 1, tzinfo=UTC), "now").isoformat()
    '2025-01-01T00:00:00+00:00'
    """
    if not isinstance(value, datetime):
        raise StoreRefused(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreRefused(
            f"{what} is a naive datetime ({value.isoformat()}); pass a timezone-aware one, "
            "e.g. datetime.now(UTC)"
        )
    return value.astimezone(UTC)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A datetime column that only accepts aware datetimes and always returns UTC-aware ones."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(
        self, value: datetime | None, dialect: Dialect | None
    ) -> datetime | None:
        if value is None:
            return None
        utc = require_utc(value, "a datetime column value")
        if dialect is not None and dialect.name == "sqlite":
            # SQLite's DATETIME storage drops the offset anyway; make that explicit: naive UTC.
            return utc.replace(tzinfo=None)
        return utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class JSONDocument(sa.TypeDecorator[Any]):
    """JSON everywhere; JSONB on PostgreSQL so the documents are compact and indexable if
    needed. PostgreSQL's type is looked up when a PostgreSQL connection first uses the column,
    so a store on SQLite never imports that dialect."""

    impl = sa.JSON
    cache_ok = True
    #: As ``sa.JSON``: a Python ``None`` is stored as JSON ``null``, not SQL ``NULL``.
    should_evaluate_none = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import JSONB

            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(sa.JSON())


JSONType: TypeEngine[Any] = JSONDocument()

#: Surrogate keys: BIGINT on PostgreSQL (the ledger grows without bound); INTEGER on SQLite,
#: where only ``INTEGER PRIMARY KEY`` is the auto-incrementing rowid.
BigId: TypeEngine[int] = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
