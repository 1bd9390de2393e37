"""Scheduled ticks and watermarks: duplicate beats are harmless and windows never go back.

A tick row is unique per (schedule, tick): the first ``try_start_tick`` wins, later beats of
the same tick get False. A failed tick may be started again (a retry), and so may a tick left
``running`` longer than ``stale_after`` (its process died). The watermark — the end of the last
successful window — only ever moves forward.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.store.engine import dialect_insert
from worker.store.records import TickInfo
from worker.store.schema import schedule_ticks, schedule_watermarks
from worker.store.sqltypes import require_utc


def try_start_tick(
    conn: Connection,
    schedule: str,
    tick: datetime,
    *,
    now: datetime,
    stale_after: timedelta | None,
) -> bool:
    """Claim ``tick`` of ``schedule``; False when it is running or done already."""
    tick = require_utc(tick, "tick")
    now = require_utc(now, "now")
    inserted = conn.execute(
        dialect_insert(conn, schedule_ticks)
        .values(schedule=schedule, tick=tick, status="running", attempts=1, started_at=now)
        .on_conflict_do_nothing(index_elements=["schedule", "tick"])
        .returning(schedule_ticks.c.id)
    ).first()
    # RETURNING, not rowcount: psycopg reports -1 for INSERT … ON CONFLICT DO NOTHING.
    if inserted is not None:
        return True
    retry = schedule_ticks.c.status == "failed"
    if stale_after is not None:
        retry = sa.or_(
            retry,
            sa.and_(
                schedule_ticks.c.status == "running",
                schedule_ticks.c.started_at < now - stale_after,
            ),
        )
    restarted = conn.execute(
        sa.update(schedule_ticks)
        .where(schedule_ticks.c.schedule == schedule, schedule_ticks.c.tick == tick, retry)
        .values(
            status="running",
            attempts=schedule_ticks.c.attempts + 1,
            started_at=now,
            finished_at=None,
            error=None,
        )
        .returning(schedule_ticks.c.id)
    ).first()
    return restarted is not None


def finish_tick(
    conn: Connection,
    schedule: str,
    tick: datetime,
    *,
    ok: bool,
    window: tuple[datetime, datetime] | None,
    error: str | None,
    now: datetime,
) -> None:
    """Record a tick's outcome; on success move the watermark to the window's end (or tick)."""
    tick = require_utc(tick, "tick")
    now = require_utc(now, "now")
    start, end = (
        (require_utc(window[0], "window start"), require_utc(window[1], "window end"))
        if window
        else (None, None)
    )
    done = conn.execute(
        sa.update(schedule_ticks)
        .where(schedule_ticks.c.schedule == schedule, schedule_ticks.c.tick == tick)
        .values(
            status="ok" if ok else "failed",
            finished_at=now,
            window_start=start,
            window_end=end,
            error=error,
        )
        .returning(schedule_ticks.c.id)
    ).first()
    if done is None:
        raise NotFound(
            f"schedule {schedule!r} has no started tick {tick.isoformat()}; "
            "call try_start_tick first"
        )
    if not ok:
        return
    mark = end or tick
    insert = dialect_insert(conn, schedule_watermarks).values(
        schedule=schedule, watermark=mark, updated_at=now
    )
    conn.execute(
        insert.on_conflict_do_update(
            index_elements=["schedule"],
            set_={"watermark": insert.excluded.watermark, "updated_at": now},
            # Never backwards: a late-finishing older tick leaves a newer watermark alone.
            where=schedule_watermarks.c.watermark < insert.excluded.watermark,
        )
    )


def watermark(conn: Connection, schedule: str) -> datetime | None:
    """End of the last successful window of ``schedule``, or None before its first success."""
    value: datetime | None = conn.execute(
        sa.select(schedule_watermarks.c.watermark).where(schedule_watermarks.c.schedule == schedule)
    ).scalar_one_or_none()
    return value


def last_ticks(conn: Connection, schedule: str, limit: int) -> list[TickInfo]:
    """The newest ``limit`` ticks of ``schedule``, newest first."""
    rows = conn.execute(
        sa.select(schedule_ticks)
        .where(schedule_ticks.c.schedule == schedule)
        .order_by(schedule_ticks.c.tick.desc())
        .limit(limit)
    )
    return [_tick(r) for r in rows]


def _tick(r: Any) -> TickInfo:
    return TickInfo(
        schedule=r.schedule,
        tick=r.tick,
        status=r.status,
        attempts=r.attempts,
        started_at=r.started_at,
        finished_at=r.finished_at,
        window=(r.window_start, r.window_end) if r.window_start and r.window_end else None,
        error=r.error,
    )
