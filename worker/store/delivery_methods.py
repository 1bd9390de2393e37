"""The store's delivery repository: the outbox the sinks are fed from, and each sink's breaker.

Times other processes compare (claims, retries, breakers) default to the database's clock
(``now=None``); a timezone-aware ``now`` is a test's injected time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from worker.store import outbox as _outbox
from worker.store import sink_health as _health
from worker.store.records import OutboxItem, SinkHealth, SinkLag
from worker.store.transactions import Transactions


class DeliveryMethods(Transactions):
    """Outbox deliveries and sink health (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def due_outbox(
        self, *, sink: str | None, now: datetime | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Deliveries due at ``now`` (of one sink, or all), oldest first."""
        return self._read(
            "reading the outbox", lambda c: _outbox.due(c, sink=sink, now=now, limit=limit)
        )

    def claim_outbox(
        self,
        *,
        sink: str,
        claimant: str,
        now: datetime | None = None,
        lease: timedelta,
        limit: int,
        namespaces: Sequence[str] | None = None,
    ) -> list[OutboxItem]:
        """Claim due deliveries of ``sink`` (see :func:`worker.store.outbox.claim`)."""
        return self._write(
            "claiming deliveries",
            lambda c: _outbox.claim(
                c,
                sink=sink,
                claimant=claimant,
                now=now,
                lease=lease,
                limit=limit,
                namespaces=namespaces,
            ),
        )

    def release_outbox(self, outbox_ids: Sequence[int]) -> None:
        """Give claimed, unattempted deliveries back."""
        ids = list(outbox_ids)
        if ids:
            self._write("releasing deliveries", lambda c: _outbox.release(c, ids))

    def outbox_pending(self, *, namespaces: Sequence[str] | None = None) -> int:
        """Undelivered items (newest per item and sink), due or waiting for a retry."""
        return self._read(
            "counting deliveries", lambda c: _outbox.pending_count(c, namespaces=namespaces)
        )

    def sink_health(self, sink: str | None = None) -> list[SinkHealth]:
        """The breaker of ``sink`` (a healthy default when never seen), or of every sink seen."""
        if sink is None:
            return self._read("reading sink health", _health.read_all)
        return [self._read("reading sink health", lambda c: _health.read(c, sink))]

    def record_sink_failure(
        self, sink: str, error: str, *, now: datetime | None = None, namespace: str | None = None
    ) -> SinkHealth:
        """Count a failed delivery (of ``namespace``) toward the sink's breaker."""
        return self._write(
            "recording a sink failure",
            lambda c: _health.record_failure(c, sink, error, now=now, namespace=namespace),
        )

    def record_sink_success(self, sink: str, *, now: datetime | None = None) -> None:
        self._write("recording a sink success", lambda c: _health.record_success(c, sink, now=now))

    def mark_delivered(self, outbox_id: int, *, now: datetime | None = None) -> None:
        self._write("marking a delivery", lambda c: _outbox.mark_delivered(c, outbox_id, now=now))

    def mark_delivered_unless_erased(
        self, outbox_id: int, *, namespace: str, generation: int, now: datetime | None = None
    ) -> bool:
        """Mark a delivery unless ``namespace``'s erase generation moved on from
        ``generation`` (False: nothing marked), in one transaction."""
        return self._write(
            "marking a delivery",
            lambda c: _outbox.mark_delivered_unless_erased(
                c, outbox_id, namespace=namespace, generation=generation, now=now
            ),
        )

    def mark_delivery_failed(
        self,
        outbox_id: int,
        error: str,
        *,
        next_attempt_at: datetime | None = None,
        retry_in: timedelta | None = None,
        now: datetime | None = None,
    ) -> None:
        """Count a failed attempt; retry at ``next_attempt_at`` or ``retry_in`` after now."""
        self._write(
            "recording a failed delivery",
            lambda c: _outbox.mark_failed(
                c, outbox_id, error, next_attempt_at=next_attempt_at, retry_in=retry_in, now=now
            ),
        )

    def outbox_lag(self, *, now: datetime | None = None) -> dict[str, SinkLag]:
        """Per sink: pending deliveries and the age in seconds of the oldest."""
        return self._read("measuring outbox lag", lambda c: _outbox.lag(c, now=now))

    def requeue_current(
        self, namespace: str, *, sinks: Sequence[str], now: datetime | None = None
    ) -> int:
        """Make ``namespace``'s current files due again for ``sinks``; returns the rows made
        due (see :func:`worker.store.outbox.requeue_current`)."""
        return self._write(
            f"queueing {namespace}'s files again",
            lambda c: _outbox.requeue_current(c, namespace=namespace, sinks=sinks, now=now),
        )

    def take_back(
        self, *, sink: str, namespace: str, path: str, now: datetime | None = None
    ) -> None:
        """Make ``sink`` end with the item's current state after an erased copy landed there
        (see :func:`worker.store.outbox.take_back`)."""
        self._write(
            "taking a delivery back",
            lambda c: _outbox.take_back(c, sink=sink, namespace=namespace, path=path, now=now),
        )
