"""The store's progress repository: how far each schedule and each source got.

A schedule's ticks and watermark (the :class:`~worker.scheduling.runner.ScheduleLedger` the
tick runner needs) and the sources' cursors; both only ever move forward.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from worker.store import cursors as _cursors
from worker.store import schedule_ledger as _ticks
from worker.store.records import TickInfo
from worker.store.transactions import Transactions


class ProgressMethods(Transactions):
    """Schedule ticks and source cursors (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def try_start_tick(
        self, schedule: str, tick: datetime, *, now: datetime, stale_after: timedelta | None = None
    ) -> bool:
        """Claim a scheduled tick; False when another beat already started or finished it."""
        return self._write(
            "starting a tick",
            lambda c: _ticks.try_start_tick(c, schedule, tick, now=now, stale_after=stale_after),
        )

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
        """Record a tick's outcome; a success moves the watermark forward (never back)."""
        self._write(
            "finishing a tick",
            lambda c: _ticks.finish_tick(
                c, schedule, tick, ok=ok, window=window, error=error, now=now
            ),
        )

    def watermark(self, schedule: str) -> datetime | None:
        return self._read("reading a watermark", lambda c: _ticks.watermark(c, schedule))

    def last_ticks(self, schedule: str, limit: int = 5) -> list[TickInfo]:
        return self._read("listing ticks", lambda c: _ticks.last_ticks(c, schedule, limit))

    def get_cursor(self, source: str, key: str) -> str | None:
        return self._read("reading a cursor", lambda c: _cursors.get_cursor(c, source, key))

    def set_cursor(
        self, source: str, key: str, value: str, *, now: datetime, namespace: str | None = None
    ) -> None:
        self._write(
            "writing a cursor",
            lambda c: _cursors.set_cursor(c, source, key, value, namespace=namespace, now=now),
        )

    def list_cursors(self, source: str, *, limit: int, after: str = "") -> list[tuple[str, str]]:
        """A page of ``source``'s (key, value) cursors with keys after ``after``, key order."""
        return self._read(
            f"listing {source} cursors",
            lambda c: _cursors.list_cursors(c, source, limit=limit, after=after),
        )
