"""An in-memory :class:`~worker.service.tick.ScheduleLedger`: the protocol's contract in
dictionaries, for pure tests of the runner and the window property tests.

It is a full implementation (uniqueness per tick, retry after failure, monotone watermark),
and it refuses protocol misuse loudly so a runner bug cannot hide behind a forgiving store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

TickState = Literal["running", "ok", "failed"]


@dataclass
class TickRecord:
    """One (schedule, tick) row: its state and every attempt's timestamps."""

    state: TickState
    attempts: int
    started_at: datetime
    finished_at: datetime | None = None
    window: tuple[datetime, datetime] | None = None
    error: str | None = None


@dataclass
class InMemoryScheduleLedger:
    """Ticks and watermarks kept in dictionaries; one process, no persistence."""

    ticks: dict[tuple[str, datetime], TickRecord] = field(default_factory=dict)
    watermarks: dict[str, datetime] = field(default_factory=dict)

    def try_start_tick(self, schedule: str, tick: datetime, *, now: datetime) -> bool:
        record = self.ticks.get((schedule, tick))
        if record is not None and record.state in ("running", "ok"):
            return False
        attempts = record.attempts + 1 if record is not None else 1
        self.ticks[(schedule, tick)] = TickRecord("running", attempts, started_at=now)
        return True

    def watermark(self, schedule: str) -> datetime | None:
        return self.watermarks.get(schedule)

    def finish_tick(
        self,
        schedule: str,
        tick: datetime,
        *,
        ok: bool,
        window: tuple[datetime, datetime] | None,
        error: str | None,
        now: datetime,
    ) -> None:
        record = self.ticks.get((schedule, tick))
        if record is None or record.state != "running":
            raise AssertionError(f"finish_tick({schedule!r}, {tick}) without a running attempt")
        record.state = "ok" if ok else "failed"
        record.finished_at, record.window, record.error = now, window, error
        if ok:
            current = self.watermarks.get(schedule)
            self.watermarks[schedule] = tick if current is None else max(current, tick)

    def successful_windows(self, schedule: str) -> list[tuple[datetime, datetime]]:
        """Windows of the schedule's successful ticks, oldest first."""
        return sorted(
            r.window
            for (name, _), r in self.ticks.items()
            if name == schedule and r.state == "ok" and r.window is not None
        )
