"""Pull conversations updated in a window from the sources into the queue as candidates.

One implementation for the scheduled ``scan_sources`` action and ``memworker reconcile
--since``. At-least-once: candidates are enqueued first and the per-thread cursors move only
afterwards (a crash in between re-reads the same messages, whose deterministic ids the ledger
then dedupes); a thread whose candidates were filtered out keeps its cursor.

With the LangGraph store sink configured, the same scan also reads what agents wrote: their
inbox items (:mod:`worker.sources.inbox`; removed once merged) and the direct edits the sink
absorbed (:func:`worker.service.agent_edits.settle_agent_edits`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from worker.integrations.store_layout import StoreLayout
from worker.models import Candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.agent_edits import settle_agent_edits
from worker.settings import Settings
from worker.sinks.langgraph_store import LangGraphStoreSink, item_content
from worker.sources.inbox import CURSOR_SOURCE as INBOX_SOURCE
from worker.sources.inbox import collect_inbox, item_hash
from worker.sources.langgraph_threads import collect_threads
from worker.store.memory import MemoryStore

log = logging.getLogger(__name__)


def _everything(_namespace: str) -> bool:
    return True


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


def scan_sources(
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
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
    if not settings.langgraph_url:
        return SourceScan(configured=False)
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=settings.langgraph_url, api_key=settings.langgraph_api_key)
    found = collect_threads(
        client,
        start,
        end,
        cursors=store,
        assistant_id=assistant_id,
        assistant_key=settings.thread_assistant_key,
        trace_id=trace_id,
        max_text_bytes=settings.max_text_bytes,
        now=now,
    ).only(keep)
    by_namespace: dict[str, list[Candidate]] = {}
    for candidate in found.candidates:
        by_namespace.setdefault(candidate.namespace, []).append(candidate)
    if enqueue:
        if found.candidates:
            queue.enqueue_many(found.candidates)
        found.advance(store, now=now)
        for namespace in by_namespace:
            queue.mark_due(namespace)
    inbox = removed = edits = 0
    if "langgraph" in settings.sinks:
        sink = LangGraphStoreSink.from_settings(settings)
        try:
            inbox, removed = scan_inbox(
                queue, store, sink, settings, now=now, trace_id=trace_id, keep=keep, enqueue=enqueue
            )
            if enqueue:
                edits = settle_agent_edits(queue, store, sink, now=now, keep=keep).enqueued
        finally:
            sink.close()
    return SourceScan(
        True, len(found.threads_seen), tuple(found.candidates), by_namespace, inbox, removed, edits
    )


def scan_inbox(
    queue: RedisQueue,
    store: MemoryStore,
    sink: LangGraphStoreSink,
    settings: Settings,
    *,
    now: datetime,
    trace_id: str,
    keep: Callable[[str], bool] = _everything,
    enqueue: bool = True,
) -> tuple[int, int]:
    """Queue the new inbox items of the namespaces ``keep`` accepts, then record them; remove
    the items an earlier scan queued once the ledger holds their candidates. Returns (candidates
    queued, items removed); without ``enqueue`` nothing is written anywhere."""

    def merged(namespace: str, ids: Sequence[str]) -> bool:
        return not ids or store.already_recorded(namespace, ids) >= set(ids)

    found = collect_inbox(
        sink.client,
        StoreLayout.from_settings(settings),
        cursors=store,
        merged=merged,
        now=now,
        trace_id=trace_id,
        max_text_bytes=settings.max_text_bytes,
    )
    candidates = [c for c in found.candidates if keep(c.namespace)]
    if not enqueue:
        return len(candidates), 0
    if candidates:
        queue.enqueue_many(candidates)
    for namespace, consumed in found.cursor_updates.items():
        if keep(namespace):  # recorded only now that its candidates are queued
            store.set_cursor(
                INBOX_SOURCE, namespace, json.dumps(consumed), namespace=namespace, now=now
            )
    for namespace in {c.namespace for c in candidates}:
        queue.mark_due(namespace)
    removed = 0
    layout = StoreLayout.from_settings(settings)
    for store_ns, key, sha in found.removable:
        owner = layout.parse_user(store_ns)
        if owner is None or not keep(owner.key):
            continue
        value = sink.raw_item(store_ns, key)
        if (
            value is not None
            and item_hash(item_content(value)) == sha
            and sink.remove_item(store_ns, key)
        ):
            removed += 1  # merged, and still exactly what was merged: the agent added nothing
    if removed:
        log.info("inbox: removed %d merged item(s)", removed)
    return len(candidates), removed
