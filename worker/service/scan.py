"""Pull conversations updated in a window from the sources into the queue as candidates.

One implementation for the scheduled ``scan_sources`` action and ``memworker reconcile
--since``. At-least-once: candidates are enqueued first and the per-thread cursors move only
afterwards (a crash in between re-reads the same messages, whose deterministic ids the ledger
then dedupes); a thread whose candidates were filtered out keeps its cursor.

With the LangGraph store sink configured, the same scan also reads what agents wrote: their
inbox items (:mod:`worker.connectors.inbox`; removed once merged) and the direct edits the sink
absorbed (:func:`worker.service.edits.settle_agent_edits`).

**Identity.** A thread files under its owner, as the server vouches for it (see
:mod:`worker.connectors.langgraph`); a thread whose owner cannot be established is set
aside, listed and counted (:attr:`SourceScan.threads_set_aside`), never filed under anyone.
Inbox items and agent edits file under the user whose store namespace holds them (the
deep-agent helper gives each run its own by the same identity rule).

**Bulkheads.** Each namespace is enqueued on its own (:class:`~worker.service.bulkhead.Bulkhead`):
a namespace whose backlog is full, or whose enqueue fails for any reason, is set aside with
the reason and keeps its cursors (read again next time), while every other namespace is
enqueued and moves on. An inbox item over :data:`~worker.types.MAX_INBOX_ITEM_LINES`
lines or :data:`~worker.types.MAX_INBOX_ITEM_BYTES` bytes is set aside by itself (named in the
result) before any line of it is read, never enqueued in part, so it cannot fill its user's
backlog every night nor make every scan parse it: its cursor remembers it, and later scans
name it again without reading it until the agent changes it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from worker.connectors.base import InboxSource, Sink, ThreadSource
from worker.models import Candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.bulkhead import Bulkhead, SetAside
from worker.service.edits import settle_agent_edits
from worker.store.memory import MemoryStore

log = logging.getLogger(__name__)


#: What a thread set aside for its owner is listed under in :attr:`SourceScan.set_aside` (its
#: namespace is what could not be established; the item is the thread id).
THREAD_SET_ASIDE: Final = "thread"


def _everything(_namespace: str) -> bool:
    return True


@dataclass(frozen=True)
class ScanParts:
    """The parts a scan reads, built by the runtime from settings (see
    :func:`worker.runtime.container.scan_parts`); without ``threads`` no source is configured."""

    threads: ThreadSource | None = None
    #: What agents append to their inbox, when a store carries one.
    inbox: InboxSource | None = None
    #: The compare-and-set sink whose absorbed agent edits the scan settles.
    edits: Sink | None = None


@dataclass(frozen=True)
class SourceScan:
    """What a scan found: ``configured`` is False when no source is set up."""

    configured: bool
    threads: int = 0
    candidates: tuple[Candidate, ...] = ()
    by_namespace: dict[str, list[Candidate]] = field(default_factory=dict)
    #: Inbox candidates queued, inbox items removed after their merge, agent edits queued.
    inbox: int = 0
    inbox_removed: int = 0
    agent_edits: int = 0
    #: Namespaces (or inbox items, or threads) left out this time, each with its reason.
    set_aside: tuple[SetAside, ...] = ()
    #: Threads set aside because their owner could not be established, or their metadata
    #: named someone else than their owner (each also in ``set_aside``); nothing was filed.
    threads_set_aside: int = 0


def scan_sources(
    queue: RedisQueue,
    store: MemoryStore,
    parts: ScanParts,
    *,
    start: datetime,
    end: datetime,
    trace_id: str,
    now: datetime,
    keep: Callable[[str], bool] = _everything,
    assistant_id: str | None = None,
    enqueue: bool = True,
) -> SourceScan:
    """Scan ``(start, end]`` for new exchanges of the namespaces ``keep`` accepts; ``now``
    stamps the candidates and the cursor moves.

    With ``enqueue`` the candidates are queued, their namespaces marked due now, and the
    cursors advanced; without it (a dry run) nothing is written anywhere.
    """
    if parts.threads is None:
        return SourceScan(configured=False)
    found = parts.threads.collect(
        start, end, cursors=store, assistant_id=assistant_id, trace_id=trace_id, now=now
    ).only(keep)
    by_namespace: dict[str, list[Candidate]] = {}
    for candidate in found.candidates:
        by_namespace.setdefault(candidate.namespace, []).append(candidate)
    bulkhead = Bulkhead("scan")
    for thread_id, reason in found.set_aside.items():
        bulkhead.skip(THREAD_SET_ASIDE, reason, item=thread_id)
    if enqueue:
        enqueued = enqueue_each(queue, by_namespace, bulkhead)
        # A thread of a namespace set aside keeps its cursor: read again by the next scan.
        found.only(lambda namespace: namespace not in bulkhead.namespaces()).advance(store, now=now)
        mark_due_each(queue, enqueued, bulkhead)
    inbox = removed = edits = 0
    if parts.inbox is not None:
        inbox, removed = scan_inbox(
            queue,
            store,
            parts.inbox,
            now=now,
            trace_id=trace_id,
            keep=keep,
            enqueue=enqueue,
            bulkhead=bulkhead,
        )
    if enqueue and parts.edits is not None:
        edits = settle_agent_edits(
            queue, store, parts.edits, now=now, keep=keep, bulkhead=bulkhead
        ).enqueued
    return SourceScan(
        True,
        len(found.threads_seen),
        tuple(found.candidates),
        by_namespace,
        inbox,
        removed,
        edits,
        tuple(bulkhead.set_aside),
        len(found.set_aside),
    )


def enqueue_each(
    queue: RedisQueue, by_namespace: dict[str, list[Candidate]], bulkhead: Bulkhead
) -> list[str]:
    """Enqueue each namespace's candidates on its own, one round trip each; returns the
    namespaces to mark due: all of them, since a full backlog may take some candidates and
    refuse the rest (its namespace is set aside, saying how many went in)."""
    for namespace, candidates in by_namespace.items():
        bulkhead.run(namespace, lambda c=candidates: queue.enqueue_many(c))  # type: ignore[misc]
    return list(by_namespace)


def mark_due_each(queue: RedisQueue, namespaces: Sequence[str], bulkhead: Bulkhead) -> None:
    """Make each namespace due now, one at a time (a failure sets only that one aside)."""
    for namespace in namespaces:
        bulkhead.run(namespace, lambda n=namespace: queue.mark_due(n))  # type: ignore[misc]


def scan_inbox(
    queue: RedisQueue,
    store: MemoryStore,
    source: InboxSource,
    *,
    now: datetime,
    trace_id: str,
    keep: Callable[[str], bool] = _everything,
    enqueue: bool = True,
    bulkhead: Bulkhead | None = None,
) -> tuple[int, int]:
    """Queue the new inbox items of the namespaces ``keep`` accepts, then record them; remove
    the items an earlier scan queued once the ledger holds their candidates. Returns (candidates
    queued, items removed); without ``enqueue`` nothing is written anywhere. Namespaces and
    items set aside go to ``bulkhead`` (see the module docstring)."""
    bulkhead = bulkhead if bulkhead is not None else Bulkhead("inbox scan")

    def merged(namespace: str, ids: Sequence[str]) -> bool:
        return not ids or store.already_recorded(namespace, ids) >= set(ids)

    found = source.collect(cursors=store, merged=merged, now=now, trace_id=trace_id)
    for namespace, key, reason in found.set_aside:
        if keep(namespace):
            bulkhead.skip(namespace, reason, item=key)
    candidates = [c for c in found.candidates if keep(c.namespace)]
    if not enqueue:
        return len(candidates), 0
    by_namespace: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_namespace.setdefault(candidate.namespace, []).append(candidate)
    enqueued = enqueue_each(queue, by_namespace, bulkhead)
    for namespace, consumed in found.cursor_updates.items():
        # Recorded only now that its candidates are queued; an item set aside is recorded as
        # such, so later scans report it without reading it until an agent changes it.
        if keep(namespace) and namespace not in bulkhead.namespaces():
            bulkhead.run(
                namespace,
                lambda n=namespace, k=consumed: store.set_cursor(  # type: ignore[misc]
                    source.cursor_source, n, json.dumps(k), namespace=n, now=now
                ),
            )
    mark_due_each(queue, enqueued, bulkhead)
    removed = 0
    for store_ns, key, sha in found.removable:
        owner = source.owner_of(store_ns)
        # Merged, and still exactly what was merged: the agent added nothing.
        if owner is not None and keep(owner) and source.remove_if_unchanged(store_ns, key, sha):
            removed += 1
    if removed:
        log.info("inbox: removed %d merged item(s)", removed)
    return len(candidates), removed
