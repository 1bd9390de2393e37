"""The outbox: deliveries of committed file versions (and erase tombstones) to sinks.

Rows are written in the same transaction as the versions they publish. Sinks hold the latest
state of each item, so per (sink, namespace, path) only the newest row matters: older rows are
never due, and delivering a row retires the older ones. That way a slow retry of version 3
can never overwrite version 4, and an erase followed by a new memory ends with the memory.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.store.records import OutboxItem, SinkLag
from worker.store.schema import file_versions, memory_files, outbox
from worker.store.sqltypes import require_utc

#: Longest stored delivery error; sink exceptions can embed whole responses.
MAX_ERROR_CHARS: Final = 2000

_newer = outbox.alias("newer")


def _is_latest() -> sa.ColumnElement[bool]:
    """No newer row exists for the same item of the same sink."""
    return ~sa.exists().where(
        _newer.c.sink == outbox.c.sink,
        _newer.c.namespace == outbox.c.namespace,
        _newer.c.path == outbox.c.path,
        _newer.c.id > outbox.c.id,
    )


def due(conn: Connection, *, sink: str | None, now: datetime, limit: int) -> list[OutboxItem]:
    """Undelivered, due, newest-per-item rows, oldest first, with their committed content."""
    now = require_utc(now, "now")
    stmt = (
        sa.select(
            outbox,
            file_versions.c.content,
            file_versions.c.version,
            file_versions.c.created_at.label("version_created_at"),
            memory_files.c.created_at.label("file_created_at"),
        )
        .select_from(
            outbox.outerjoin(
                file_versions, file_versions.c.id == outbox.c.file_version_id
            ).outerjoin(memory_files, memory_files.c.id == file_versions.c.file_id)
        )
        .where(outbox.c.delivered_at.is_(None), outbox.c.next_attempt_at <= now, _is_latest())
        .order_by(outbox.c.id)
        .limit(limit)
    )
    if sink is not None:
        stmt = stmt.where(outbox.c.sink == sink)
    return [_item(r) for r in conn.execute(stmt)]


def _item(r: Any) -> OutboxItem:
    deleted = r.kind == "erase"
    return OutboxItem(
        id=int(r.id),
        sink=r.sink,
        namespace=r.namespace,
        path=r.path,
        deleted=deleted,
        content="" if deleted else r.content,
        version=0 if deleted else r.version,
        created_at=r.created_at if deleted else r.file_created_at,
        modified_at=r.created_at if deleted else r.version_created_at,
        attempts=r.attempts,
        last_error=r.last_error,
    )


def _row(conn: Connection, outbox_id: int) -> Any:
    row = conn.execute(sa.select(outbox).where(outbox.c.id == outbox_id)).first()
    if row is None:
        raise NotFound(
            f"outbox item {outbox_id} does not exist (already delivered and retired, or erased)"
        )
    return row


def mark_delivered(conn: Connection, outbox_id: int, *, now: datetime) -> None:
    """Record a delivery and retire older rows of the same item for this sink.

    A delivered erase tombstone is deleted: it names the erased namespace, and once every sink
    has deleted the data nothing of that user may remain.
    """
    now = require_utc(now, "now")
    row = _row(conn, outbox_id)
    same_item = sa.and_(
        outbox.c.sink == row.sink,
        outbox.c.namespace == row.namespace,
        outbox.c.path == row.path,
        outbox.c.id < row.id,
    )
    conn.execute(sa.delete(outbox).where(same_item, outbox.c.kind == "erase"))
    conn.execute(
        sa.update(outbox)
        .where(same_item, outbox.c.delivered_at.is_(None))
        .values(delivered_at=now, superseded_by=row.id)
    )
    if row.kind == "erase":
        conn.execute(sa.delete(outbox).where(outbox.c.id == row.id))
    else:
        conn.execute(
            sa.update(outbox)
            .where(outbox.c.id == row.id)
            .values(delivered_at=now, attempts=outbox.c.attempts + 1, last_error=None)
        )


def mark_failed(
    conn: Connection, outbox_id: int, error: str, *, next_attempt_at: datetime, now: datetime
) -> None:
    """Count a failed attempt and schedule the next one."""
    require_utc(now, "now")
    next_attempt_at = require_utc(next_attempt_at, "next_attempt_at")
    _row(conn, outbox_id)
    conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == outbox_id)
        .values(
            attempts=outbox.c.attempts + 1,
            last_error=error[:MAX_ERROR_CHARS],
            next_attempt_at=next_attempt_at,
        )
    )


def lag(conn: Connection, *, now: datetime) -> dict[str, SinkLag]:
    """Per sink: undelivered items (newest row per item) and the oldest one's age."""
    now = require_utc(now, "now")
    rows = conn.execute(
        sa.select(outbox.c.sink, sa.func.count(), sa.func.min(outbox.c.created_at))
        .where(outbox.c.delivered_at.is_(None), _is_latest())
        .group_by(outbox.c.sink)
    )
    result: dict[str, SinkLag] = {}
    for sink, count, oldest in rows:
        # min() keeps the column's type, so ``oldest`` is an aware UTC datetime.
        age = max((now - oldest).total_seconds(), 0.0)
        result[sink] = SinkLag(pending=int(count), oldest_age_seconds=age)
    return result
