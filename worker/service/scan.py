"""Pull conversations updated in a window from the sources into the queue as candidates.

One implementation for the scheduled ``scan_sources`` action and ``memworker reconcile
--since``. At-least-once: candidates are enqueued first and the per-thread cursors move only
afterwards (a crash in between re-reads the same messages, whose deterministic ids the ledger
then dedupes); a thread whose candidates were filtered out keeps its cursor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from worker.models import Candidate
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings
from worker.sources.langgraph_threads import collect_threads
from worker.store.memory import MemoryStore


def _everything(_namespace: str) -> bool:
    return True


@dataclass(frozen=True)
class SourceScan:
    """What a scan found: ``configured`` is False when no source is set up."""

    configured: bool
    threads: int = 0
    candidates: tuple[Candidate, ...] = ()
    by_namespace: dict[str, list[Candidate]] = field(default_factory=dict)


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
    return SourceScan(True, len(found.threads_seen), tuple(found.candidates), by_namespace)
