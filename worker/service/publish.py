"""Publishing: committed versions delivered from the outbox to the sinks, and delivered again on
request.

Only committed versions are ever in the outbox (rows are written in the commit's transaction),
so a sink can never see an uncommitted version. Invariants of a delivery pass:

* **One deliverer per row at a time.** Rows are claimed (a short lease in SQL) before a sink is
  called; any number of deliverers (workers, the CLI) may run at once and each row is attempted
  by one of them. A deliverer that dies leaves its claim to expire; the row is taken again.
* **A hung sink holds one thread.** In a worker process at most one pass at a time works on
  each sink (:class:`SinkGate`); another pass skips that sink and serves the others, so a
  sink that stopped answering never delays the files of a healthy one.
* **A failing sink is probed, not hammered.** After a few failures in a row the sink's breaker
  opens (:mod:`worker.store.outbox`): passes skip it until the breaker lets one probe
  through. Its rows wait with their own backoff; nothing is lost.
* **Bounded.** A pass claims a small batch per sink and stops before its claim could expire,
  giving back what it did not attempt; an operator command publishes only the namespaces it
  touched and reports what is still due.
* **No resurrection.** A delivery that lands after its namespace was erased is taken back at once.
* **One clock.** Every time a pass writes or compares (claims, retries, the breaker) is the
  database's (``now=None``, :mod:`worker.store.engine`); a host whose clock is a day off changes
  nothing. A ``now`` passed in is a test's injected time.

:func:`republish` (``memworker publish``) delivers the current files again, for a sink added
after memory was merged: the outbox files each commit under the sinks configured when it was
made, so a new sink holds nothing. It queues each current file in the outbox
(:meth:`~worker.store.memory.MemoryStore.requeue_current`) and delivers it through the same
claimed path as every commit (:func:`publish_now`), so a worker delivering at the same moment
never doubles a delivery. Each namespace is its own bulkhead; the store being down ends the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from worker.connectors.base import PublishedFile, Sink
from worker.errors import ExternalEdit, MemworkerError, NotFound, StoreUnavailable, describe_error
from worker.metrics import SINK_DELIVERIES
from worker.service.bulkhead import Bulkhead, Progress, SetAside, no_progress
from worker.service.edits import absorb_external_edit
from worker.store.memory import MemoryStore
from worker.store.records import OutboxItem

log = logging.getLogger(__name__)

#: First retry of one row after a failed delivery; doubles per attempt.
FIRST_RETRY_SECONDS: Final = 5.0
#: Retries never wait longer than this, so a sink back from an outage catches up within it.
MAX_RETRY_SECONDS: Final = 600.0
#: Rows one deliverer claims per sink at a time: small, so a slow sink holds few rows hostage
#: and other deliverers share the work.
CLAIM_BATCH: Final = 20
#: How long a claim holds at least (longer for a sink with a long timeout: three of its calls).
#: A pass stops before a claim could run out (see ``_deliver_claimed``), so
#: a row is never attempted by two deliverers at once.
CLAIM_LEASE: Final = timedelta(seconds=120)
#: Budget assumed for one sink call when the sink does not say (``timeout_seconds``).
DEFAULT_SINK_TIMEOUT_SECONDS: Final = 30.0
#: Most rows one delivery pass attempts over all sinks; bounds one task's run time.
DELIVERY_BATCH: Final = 200
#: Most rows one operator command delivers before it returns and reports what is left.
PUBLISH_NOW_LIMIT: Final = 500
#: Namespaces one SQL filter lists: an operator command may have touched a whole queue's worth
#: (``reconcile --all``), far more than a statement may bind (PostgreSQL: 65,535 parameters).
NAMESPACES_PER_QUERY: Final = 1000


class SinkGate:
    """Lets at most one delivery pass per sink run at a time in this process; a pass that finds
    a sink taken skips it (the pass holding it delivers its rows)."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def enter(self, sink: str) -> Iterator[bool]:
        """Yield True when this pass got ``sink``, False when another pass holds it."""
        with self._guard:
            lock = self._locks.setdefault(sink, threading.Lock())
        got = lock.acquire(blocking=False)
        try:
            yield got
        finally:
            if got:
                lock.release()


def default_claimant() -> str:
    """``host:pid``: names the deliverer holding a claim, for ``status`` and debugging."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class DeliveryReport:
    """What a pass did: rows delivered, rows that failed (retried later), sinks skipped because
    their breaker is open, (for :func:`publish_now`) deliveries still waiting, and the
    namespaces set aside, each with the sink's error (their rows retry on their own backoff),
    and how many rows each sink took (``by_sink``: only sinks that took any), so a report never
    names a sink as published to when every delivery to it failed."""

    delivered: int
    failed: int
    skipped_sinks: tuple[str, ...] = ()
    remaining: int = 0
    set_aside: tuple[SetAside, ...] = ()
    by_sink: tuple[tuple[str, int], ...] = ()

    def __add__(self, other: DeliveryReport) -> DeliveryReport:
        skipped = tuple(dict.fromkeys(self.skipped_sinks + other.skipped_sinks))
        taken = dict(self.by_sink)
        for name, count in other.by_sink:
            taken[name] = taken.get(name, 0) + count
        return DeliveryReport(
            self.delivered + other.delivered,
            self.failed + other.failed,
            skipped,
            other.remaining,
            self.set_aside + other.set_aside,
            tuple(taken.items()),
        )

    @property
    def sinks_taken(self) -> tuple[str, ...]:
        """The sinks that took at least one row, in the order they were served."""
        return tuple(name for name, count in self.by_sink if count)


def retry_delay(attempts: int) -> timedelta:
    """Backoff of one row after ``attempts`` failures: 5 s, 10 s, 20 s … capped at 10 min.

    >>> retry_delay(1), retry_delay(20)
    (datetime.timedelta(seconds=5), datetime.timedelta(seconds=600))
    """
    seconds = min(FIRST_RETRY_SECONDS * 2 ** max(attempts - 1, 0), MAX_RETRY_SECONDS)
    return timedelta(seconds=seconds)


def deliver_due(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    *,
    now: datetime | None = None,
    claimant: str | None = None,
    namespaces: Sequence[str] | None = None,
    limit: int = DELIVERY_BATCH,
    gate: SinkGate | None = None,
) -> DeliveryReport:
    """One pass: claim and deliver due rows of every sink whose breaker lets it through.

    ``namespaces`` restricts the pass to those namespaces; ``limit`` bounds the rows attempted;
    ``gate`` (a worker's) skips sinks another pass of this process is working on.
    """
    claimant = claimant or default_claimant()
    gate = gate or SinkGate()
    report = DeliveryReport(0, 0)
    for name, sink in sinks.items():
        budget = limit - report.delivered - report.failed
        if budget <= 0:
            break
        with gate.enter(name) as got:
            if not got:
                continue
            part = _deliver_sink(
                store, name, sink, now=now, claimant=claimant, namespaces=namespaces, limit=budget
            )
            report += replace(part, by_sink=((name, part.delivered),) if part.delivered else ())
    return report


def publish_now(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    *,
    now: datetime | None = None,
    namespaces: Sequence[str],
    claimant: str | None = None,
    limit: int = PUBLISH_NOW_LIMIT,
) -> DeliveryReport:
    """Deliver what the outbox holds for ``namespaces`` now (an operator command's last step),
    pass after pass up to ``limit`` rows; the report says exactly how many deliveries of
    ``namespaces`` are still due (counted :data:`NAMESPACES_PER_QUERY` namespaces at a time)."""
    total = DeliveryReport(0, 0)
    if not sinks or not namespaces:
        return total
    chunks = [
        namespaces[i : i + NAMESPACES_PER_QUERY]
        for i in range(0, len(namespaces), NAMESPACES_PER_QUERY)
    ]
    for chunk in chunks:
        while total.delivered + total.failed < limit:
            left = limit - total.delivered - total.failed
            report = deliver_due(
                store, sinks, now=now, claimant=claimant, namespaces=chunk, limit=left
            )
            total += report
            if report.delivered == 0:
                break
    remaining = sum(store.outbox_pending(namespaces=chunk) for chunk in chunks)
    return replace(total, remaining=remaining)


def _deliver_sink(
    store: MemoryStore,
    name: str,
    sink: Sink,
    *,
    now: datetime | None,
    claimant: str,
    namespaces: Sequence[str] | None,
    limit: int,
) -> DeliveryReport:
    (health,) = store.sink_health(name)
    state = health.state(now or store.db_now())
    if state == "open":
        return DeliveryReport(0, 0, (name,))
    # A probing sink gets one row: if it is still down, one timeout is all it costs.
    size = 1 if state == "probing" else min(CLAIM_BATCH, limit)
    report = DeliveryReport(0, 0)
    recovering = health.consecutive_failures > 0
    per_call = float(getattr(sink, "timeout_seconds", DEFAULT_SINK_TIMEOUT_SECONDS))
    lease = max(CLAIM_LEASE, timedelta(seconds=3 * per_call))
    clock = _PassClock(now)
    while report.delivered + report.failed < limit:
        claimed = store.claim_outbox(
            sink=name,
            claimant=claimant,
            now=clock(),
            lease=lease,
            limit=min(size, limit - report.delivered - report.failed),
            namespaces=namespaces,
        )
        if not claimed:
            return report
        outcome, recovering = _deliver_claimed(
            store,
            name,
            sink,
            claimed,
            clock=clock,
            deadline=time.monotonic() + (lease.total_seconds() - per_call),
            recovering=recovering,
        )
        report += outcome
        if outcome.skipped_sinks or state == "probing" or len(claimed) < size:
            return report
    return report


class _PassClock:
    """An injected ``now`` moved on by the time the pass has taken, so claims and retries made
    late in a long pass are stamped with the time they are made; None (the database's clock,
    read by each store call) when nothing was injected."""

    def __init__(self, now: datetime | None) -> None:
        self._start, self._now = time.monotonic(), now

    def __call__(self) -> datetime | None:
        if self._now is None:
            return None
        return self._now + timedelta(seconds=time.monotonic() - self._start)


def _deliver_claimed(
    store: MemoryStore,
    name: str,
    sink: Sink,
    claimed: list[OutboxItem],
    *,
    clock: _PassClock,
    deadline: float,
    recovering: bool,
) -> tuple[DeliveryReport, bool]:
    """Deliver claimed rows in order; give back the rest when the claim could run out before
    another sink call ends (``deadline``, monotonic) or the breaker opens. The first row is
    always attempted, so a pass makes progress. A namespace whose delivery failed is set aside
    for the rest of the pass (its other rows are given back), so one namespace the sink refuses
    costs one call per pass and never holds up the others."""
    report = DeliveryReport(0, 0)
    failed_here: set[str] = set()
    for index, item in enumerate(claimed):
        if index and time.monotonic() > deadline:
            store.release_outbox([i.id for i in claimed[index:]])
            break
        if item.namespace in failed_here:
            store.release_outbox([item.id])
            continue
        error = _deliver(store, sink, item, name=name, clock=clock)
        now = clock()
        if error is None:
            SINK_DELIVERIES.labels(sink=name, outcome="ok").inc()
            if recovering:
                store.record_sink_success(name, now=now)
                recovering = False
            report += DeliveryReport(1, 0)
            continue
        SINK_DELIVERIES.labels(sink=name, outcome="failed").inc()
        log.warning("sink %s could not take %s%s: %s", name, item.namespace, item.path, error)
        with contextlib.suppress(NotFound):
            store.mark_delivery_failed(
                item.id, error, retry_in=retry_delay(item.attempts + 1), now=now
            )
        health = store.record_sink_failure(name, error, now=now, namespace=item.namespace)
        recovering = True
        failed_here.add(item.namespace)
        report += DeliveryReport(0, 1, set_aside=(SetAside(item.namespace, error, item.path),))
        if health.state(now or store.db_now()) == "open":
            log.warning(
                "sink %s failed %d deliveries in a row; leaving it alone until %s",
                name,
                health.consecutive_failures,
                health.open_until,
            )
            store.release_outbox([i.id for i in claimed[index + 1 :]])
            return report + DeliveryReport(0, 0, (name,)), recovering
    return report, recovering


def _deliver(
    store: MemoryStore,
    sink: Sink,
    item: OutboxItem,
    *,
    name: str | None = None,
    clock: Callable[[], datetime | None] = lambda: None,
) -> str | None:
    """Hand one row to the sink it is filed under (``name``, the sink's own by default),
    re-check the erase generation whatever the outcome, and mark the row delivered when the
    sink took it; the error text when the sink failed (or the take-back's), None when it
    took it. ``clock`` stamps what is written after the sink call (None: the database's).
    With nothing erased since the claim, the re-check and the mark are one transaction."""
    error = _send(store, sink, item)
    now = clock()
    if error is None and _mark_unless_erased(store, item, now=now):
        return None
    error = _recheck_erase(store, name or sink.name, sink, item, error, now=now)
    if error is None:
        with contextlib.suppress(NotFound):  # the row went with an erase
            store.mark_delivered(item.id, now=now)
    return error


def _mark_unless_erased(store: MemoryStore, item: OutboxItem, *, now: datetime | None) -> bool:
    """After a sink took ``item``: mark it delivered, in the transaction that re-checks its
    namespace's erase generation. False when it was not marked: the namespace was erased
    since the claim (the caller takes the copy back, :func:`_recheck_erase`), an erase
    tombstone (nothing to take back; marked as before), or the store failed (the re-check
    reports it)."""
    if item.deleted:
        return False
    try:
        return store.mark_delivered_unless_erased(
            item.id, namespace=item.namespace, generation=item.generation, now=now
        )
    except MemworkerError:  # gone with an erase (NotFound), or the store failed: the re-check
        return False  # and the mark that follows decide, exactly as without this shortcut


def _send(store: MemoryStore, sink: Sink, item: OutboxItem) -> str | None:
    """The sink call itself: the error text when it failed, None when the sink took it."""
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
            try:
                sink.deliver(published)
            except ExternalEdit as edit:  # an agent changed the file: absorb it, never overwrite
                error = absorb_external_edit(store, sink, published, edit)
                if error is not None:
                    return error
    except Exception as exc:  # a timeout included: the write may still land (see below)
        return describe_error(exc)
    return None


def _recheck_erase(
    store: MemoryStore,
    name: str,
    sink: Sink,
    item: OutboxItem,
    error: str | None,
    *,
    now: datetime | None,
) -> str | None:
    """After every outcome of a delivery (taken, failed, timed out): if the namespace's erase
    generation moved on since the row was claimed, the copy may have landed after the erase.
    Take it out of the sink now, and make the outbox bring the sink to the item's current
    state (a tombstone, or the version the returning user committed since), so a deliverer
    that raced ``forget`` never leaves the erased text behind. Returns the delivery's error,
    or the take-back's when the delivery itself went through."""
    if item.deleted:
        return error
    try:
        if store.erase_generation(item.namespace) == item.generation:
            return error
    except MemworkerError as exc:  # the store is down: the row's retry checks again
        return error or describe_error(exc)
    log.warning(
        "%s%s was erased while %s delivered it; taking the copy back",
        item.namespace,
        item.path,
        name,
    )
    SINK_DELIVERIES.labels(sink=name, outcome="taken_back").inc()
    taken: str | None = None
    try:
        sink.erase(item.namespace, [item.path])
    except Exception as exc:  # the outbox row queued below deletes it on a later pass
        taken = describe_error(exc)
    store.take_back(sink=name, namespace=item.namespace, path=item.path, now=now)
    return error or taken


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
