"""Deliver the current files again (``memworker publish``): to every configured sink, or one.

The case it is for: a sink added after memory was merged (the LangGraph store turned on for a
deep agent) holds nothing, because the outbox files each commit under the sinks configured
when it was made. Publishing again queues each current file for the chosen sinks in the
outbox (a row of its current version, new or made due again, :meth:`~worker.store.memory.
MemoryStore.requeue_current`) and delivers it through the same claimed, breaker-guarded path
as every commit (:func:`~worker.service.publish.publish_now`), so a worker delivering at the
same moment never doubles a delivery, and a sink that fails is retried by the workers.

Each namespace is its own step behind a bulkhead: one the store cannot read is set aside with
its reason, the others are published; the store being down ends the run (nothing would fare
better).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from worker.errors import StoreUnavailable
from worker.service.bulkhead import Bulkhead, SetAside
from worker.service.progress import Progress, no_progress
from worker.service.publish import DeliveryReport, publish_now
from worker.sinks.base import Sink
from worker.store.memory import MemoryStore


@dataclass(frozen=True)
class Republished:
    """The namespaces published, the outbox rows queued for them, what the delivery did, and
    the namespaces set aside (their files were not queued)."""

    namespaces: list[str]
    queued: int
    delivery: DeliveryReport
    set_aside: tuple[SetAside, ...] = ()


def republish(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    namespaces: Sequence[str],
    *,
    now: datetime | None = None,
    progress: Progress = no_progress,
) -> Republished:
    """Queue and deliver the current files of each of ``namespaces`` to ``sinks`` (see the
    module); ``progress`` is told each namespace done. ``now`` is a test's injected time."""
    bulkhead = Bulkhead("publish")
    delivery = DeliveryReport(0, 0)
    queued = 0
    remaining = 0
    done: list[str] = []
    with progress(len(namespaces)) as advance:
        for namespace in namespaces:
            rows = bulkhead.run(
                namespace,
                lambda n=namespace: store.requeue_current(  # type: ignore[misc]
                    n, sinks=list(sinks), now=now
                ),
                stops=(StoreUnavailable,),
            )
            if rows is not None:
                queued += rows
                report = publish_now(store, sinks, now=now, namespaces=[namespace])
                delivery += report
                remaining += report.remaining
                done.append(namespace)
            advance(namespace)
    total = DeliveryReport(
        delivery.delivered,
        delivery.failed,
        delivery.skipped_sinks,
        remaining,
        delivery.set_aside,
        delivery.by_sink,
    )
    return Republished(done, queued, total, tuple(bulkhead.set_aside))
