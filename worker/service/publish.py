"""Publish committed file versions from the outbox to their sinks, retrying with backoff.

Only committed versions are ever in the outbox (rows are written in the commit's transaction),
so a sink can never see an uncommitted version. Delivery is at-least-once: sinks overwrite by
key, so a repeated delivery is harmless, and any number of deliverers (workers, the CLI) may
run at once. A delivery that lands after its namespace was erased is taken back at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from worker.errors import NotFound
from worker.metrics import SINK_DELIVERIES
from worker.sinks.base import PublishedFile, Sink
from worker.store.memory import MemoryStore
from worker.store.records import OutboxItem

log = logging.getLogger(__name__)

#: First retry after a failed delivery; doubles per attempt.
FIRST_RETRY_SECONDS = 5.0
#: Retries never wait longer than this, so a sink back from an outage catches up within it.
MAX_RETRY_SECONDS = 600.0
#: Items per delivery pass; bounds one task's run time.
DELIVERY_BATCH = 200
#: Most delivery passes of one :func:`publish_now` (an operator command); each pass delivers up
#: to a batch per sink, so this bounds the command while a sink keeps failing.
MAX_DELIVERY_PASSES = 50


@dataclass(frozen=True)
class DeliveryReport:
    delivered: int
    failed: int

    def __add__(self, other: DeliveryReport) -> DeliveryReport:
        return DeliveryReport(self.delivered + other.delivered, self.failed + other.failed)


def retry_delay(attempts: int) -> timedelta:
    """Backoff after ``attempts`` failures: 5 s, 10 s, 20 s … capped at 10 min.

    >>> retry_delay(1), retry_delay(20)
    (datetime.timedelta(seconds=5), datetime.timedelta(seconds=600))
    """
    seconds = min(FIRST_RETRY_SECONDS * 2 ** max(attempts - 1, 0), MAX_RETRY_SECONDS)
    return timedelta(seconds=seconds)


def deliver_due(store: MemoryStore, sinks: Mapping[str, Sink], *, now: datetime) -> DeliveryReport:
    """One pass: deliver up to a batch of due outbox items for every configured sink."""
    report = DeliveryReport(0, 0)
    for name, sink in sinks.items():
        for item in store.due_outbox(sink=name, now=now, limit=DELIVERY_BATCH):
            report += _deliver(store, name, sink, item, now=now)
    return report


def publish_now(store: MemoryStore, sinks: Mapping[str, Sink], *, now: datetime) -> DeliveryReport:
    """Deliver what the outbox holds now, pass after pass, so committed files appear in the
    sinks right away (an operator command's last step); stops when a pass delivers nothing."""
    total = DeliveryReport(0, 0)
    for _ in range(MAX_DELIVERY_PASSES):
        report = deliver_due(store, sinks, now=now)
        total += report
        if report.delivered == 0:
            break
    return total


def _deliver(
    store: MemoryStore, name: str, sink: Sink, item: OutboxItem, *, now: datetime
) -> DeliveryReport:
    published = PublishedFile(
        namespace=item.namespace,
        path=item.path,
        content=item.content,
        version=item.version,
        created_at=item.created_at,
        modified_at=item.modified_at,
        deleted=item.deleted,
    )
    try:
        if published.deleted:
            sink.erase(published.namespace, [published.path])
        else:
            sink.deliver(published)
            if store.was_erased(item.namespace):
                # Read before an erase, delivered after it: take the copy back out, so no
                # deliverer that raced `forget` can bring the user's data back.
                sink.erase(published.namespace, [published.path])
    except Exception as exc:
        SINK_DELIVERIES.labels(sink=name, outcome="failed").inc()
        log.warning("sink %s could not take %s%s: %s", name, item.namespace, item.path, exc)
        store.mark_delivery_failed(
            item.id, str(exc)[:2000], next_attempt_at=now + retry_delay(item.attempts + 1), now=now
        )
        return DeliveryReport(0, 1)
    SINK_DELIVERIES.labels(sink=name, outcome="ok").inc()
    with contextlib.suppress(NotFound):  # the row went with an erase, or another deliverer
        store.mark_delivered(item.id, now=now)
    return DeliveryReport(1, 0)
