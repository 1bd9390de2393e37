"""The store's health figures, read without loading its write side.

``memworker status`` shows each schedule's last tick and watermark, the sinks' delivery lag
and breakers, the recent failed runs and the queue positions recently committed. Opening a
:class:`~worker.store.memory.MemoryStore` for that would import every part of the store (the
commit, search, erase, transfer); :class:`StoreHealth` imports only the tables and queries
those reads use, and answers them exactly as ``MemoryStore``'s methods of the same names do
(the same functions, in the same read transactions, with the same error translation).

>>> from datetime import UTC, datetime
>>> health = StoreHealth.from_url("sqlite://", create=True)
>>> health.count_runs(outcome="failed", since=datetime(2025, 1, 1, tzinfo=UTC))
0
>>> health.dispose()
"""

from __future__ import annotations

from datetime import datetime

from worker.store import fence as _fence
from worker.store import outbox as _outbox
from worker.store import runs as _runs
from worker.store import schedule_ledger as _ticks
from worker.store import sink_health as _health
from worker.store.records import SinkHealth, SinkLag, TickInfo
from worker.store.transactions import Transactions, open_engine


class StoreHealth(Transactions):
    """Read-only health figures of the store at one engine."""

    @classmethod
    def from_url(cls, url: str, *, create: bool = False) -> StoreHealth:
        """Open the store at ``url`` as :meth:`MemoryStore.from_url
        <worker.store.memory.MemoryStore.from_url>` does: ``create=True`` migrates it first
        (embedded mode); an unmigrated database raises :class:`SchemaOutOfDate`."""
        return cls(open_engine(url, create=create))

    def last_ticks(self, schedule: str, limit: int = 5) -> list[TickInfo]:
        return self._read("listing ticks", lambda c: _ticks.last_ticks(c, schedule, limit))

    def watermark(self, schedule: str) -> datetime | None:
        return self._read("reading a watermark", lambda c: _ticks.watermark(c, schedule))

    def outbox_lag(self, *, now: datetime | None = None) -> dict[str, SinkLag]:
        """Per sink: pending deliveries and the age in seconds of the oldest."""
        return self._read("measuring outbox lag", lambda c: _outbox.lag(c, now=now))

    def sink_health(self) -> list[SinkHealth]:
        """The breaker of every sink seen."""
        return self._read("reading sink health", _health.read_all)

    def count_runs(self, *, outcome: str, since: datetime) -> int:
        """How many runs with ``outcome`` started at or after ``since``."""
        return self._read(
            "counting runs", lambda c: _runs.count_runs(c, outcome=outcome, since=since)
        )

    def recent_positions(self, limit: int = 500) -> list[tuple[str, str]]:
        """(namespace, applied queue position) of the most recently committed namespaces."""
        return self._read("positions", lambda c: _fence.recent_positions(c, limit))
