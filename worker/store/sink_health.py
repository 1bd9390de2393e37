"""Each sink's circuit breaker, shared by every deliverer through SQL.

A sink that fails :data:`BREAKER_THRESHOLD` deliveries in a row is *open*: deliverers leave it
alone until ``open_until``, then send one probe. A success closes it; a failed probe opens it
again for twice as long (capped), so a sink that is down for an hour costs a handful of
timeouts, not one per row per pass. ``memworker status`` reads the same rows.

**A bulkhead, not a fuse.** Failures of one namespace in a row count once (its digest is kept
in ``failing_digest``) and do not re-open the breaker: a single item the sink refuses (too
large, a path it rejects) cannot open the breaker for every user. A sink that is down fails
for every namespace and opens it after :data:`BREAKER_THRESHOLD` of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import MAX_ERROR_CHARS
from worker.store import fence
from worker.store.clock import resolve
from worker.store.engine import dialect_insert
from worker.store.records import SinkHealth
from worker.store.schema import sink_health

#: Failures in a row that open the breaker: enough that one flaky request does not, few enough
#: that a dead sink is noticed within one delivery pass.
BREAKER_THRESHOLD: Final = 3
#: How long the breaker first stays open; doubles with each failed probe.
BREAKER_FIRST_OPEN_SECONDS: Final = 15.0
#: Longest the breaker stays open, so a sink back from an outage is found within it.
BREAKER_MAX_OPEN_SECONDS: Final = 300.0


def open_for(consecutive_failures: int) -> timedelta:
    """How long the breaker stays open after this many failures in a row (0 when closed).

    >>> open_for(2), open_for(3), open_for(4), open_for(40)
    (datetime.timedelta(0), datetime.timedelta(seconds=15), datetime.timedelta(seconds=30), \
datetime.timedelta(seconds=300))
    """
    if consecutive_failures < BREAKER_THRESHOLD:
        return timedelta(0)
    doublings = min(consecutive_failures - BREAKER_THRESHOLD, 16)
    seconds = min(BREAKER_FIRST_OPEN_SECONDS * 2**doublings, BREAKER_MAX_OPEN_SECONDS)
    return timedelta(seconds=seconds)


def read(conn: Connection, sink: str) -> SinkHealth:
    """The sink's breaker; a sink never seen is healthy."""
    row = conn.execute(sa.select(sink_health).where(sink_health.c.sink == sink)).first()
    if row is None:
        return SinkHealth(sink=sink)
    return _health(row)


def read_all(conn: Connection) -> list[SinkHealth]:
    """Every sink with a recorded outcome, by name."""
    rows = conn.execute(sa.select(sink_health).order_by(sink_health.c.sink))
    return [_health(r) for r in rows]


def record_failure(
    conn: Connection, sink: str, error: str, *, now: datetime | None, namespace: str | None = None
) -> SinkHealth:
    """Count one more failure in a row; opens (or re-opens) the breaker past the threshold,
    until a time on the database's clock (``now=None``), which every deliverer compares with.
    A failure of the same ``namespace`` as the last one only updates the error."""
    now = resolve(conn, now)
    current = conn.execute(
        sa.select(sink_health.c.consecutive_failures, sink_health.c.failing_digest).where(
            sink_health.c.sink == sink
        )
    ).first()
    failures = int(current.consecutive_failures) if current is not None else 0
    failing = fence.digest(namespace) if namespace is not None else None
    values: dict[str, object] = {"last_error": error[:MAX_ERROR_CHARS], "last_failure_at": now}
    if not (failing is not None and failures and current and current.failing_digest == failing):
        # Another namespace failed (or none was named): one more failure in a row.
        window = open_for(failures + 1)
        values |= {
            "consecutive_failures": failures + 1,
            "open_until": now + window if window else None,
            "failing_digest": failing,
        }
    _upsert(conn, sink, values)
    return read(conn, sink)


def record_success(conn: Connection, sink: str, *, now: datetime | None) -> None:
    """Close the breaker: the sink answered."""
    now = resolve(conn, now)
    _upsert(
        conn,
        sink,
        {
            "consecutive_failures": 0,
            "open_until": None,
            "last_error": None,
            "last_success_at": now,
            "failing_digest": None,
        },
    )


def _upsert(conn: Connection, sink: str, values: Mapping[str, object]) -> None:
    insert = dialect_insert(conn, sink_health).values(sink=sink, **values)
    conn.execute(insert.on_conflict_do_update(index_elements=["sink"], set_=values))


def _health(row: sa.Row[tuple[object, ...]]) -> SinkHealth:
    m = row._mapping
    return SinkHealth(
        sink=str(m["sink"]),
        consecutive_failures=int(m["consecutive_failures"]),
        open_until=m["open_until"],
        last_error=m["last_error"],
        last_failure_at=m["last_failure_at"],
        last_success_at=m["last_success_at"],
    )
