"""Claim every due namespace, hand each claim to a dispatcher, and report the queue's health;
or make every pending namespace due now (a drain).

The claiming itself (and giving a claim back when it cannot be dispatched) is the queue's
mechanism, :func:`worker.queue.sweep.sweep_due`; this use case adds what a sweep reports.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final

from worker import metrics
from worker.queue.encoding import to_ms
from worker.queue.keys import scope_of
from worker.queue.redis_queue import Claim, RedisQueue
from worker.queue.sweep import sweep_due
from worker.service.bulkhead import Bulkhead

#: How often a worker process refreshes the queue-depth gauges. Reading them costs one small
#: script per shard (counters, not a walk over the namespaces), but every process's sweeps
#: would still add that round trip every 2 s for graphs scraped far less often; the gauges lag
#: by at most this much.
QUEUE_GAUGES_EVERY_SECONDS: Final = 15.0


class GaugeSchedule:
    """When a process's sweeps next refresh the queue gauges (one per worker process)."""

    def __init__(self, every_seconds: float = QUEUE_GAUGES_EVERY_SECONDS) -> None:
        self.every_seconds = every_seconds
        self._next = 0.0
        self._lock = threading.Lock()

    def due(self) -> bool:
        """True at most once per period (the first call included)."""
        with self._lock:
            now = time.monotonic()
            if now < self._next:
                return False
            self._next = now + self.every_seconds
            return True


def sweep(
    queue: RedisQueue,
    dispatch: Callable[[Claim], None],
    *,
    now: float | None = None,
    gauges: GaugeSchedule | None = None,
) -> list[Claim]:
    """Claim and dispatch due namespaces (``now``: epoch seconds, for tests and catch-up tools);
    counts the claims, observes how long each namespace waited past its due time, and
    refreshes the queue-depth gauges (every sweep, or when ``gauges`` says so)."""
    claims = sweep_due(queue, dispatch, now=now)
    metrics.CLAIMS.inc(len(claims))
    # Lag against the clock that set the due times: the Redis server's (``now`` is a test hook).
    metrics.observe_due_lag(claims, to_ms(now) if now is not None else queue.server_ms())
    if gauges is None or gauges.due():
        metrics.refresh_queue_gauges(queue.admin.stats(now=now).scopes)
    return claims


def drain(queue: RedisQueue, *, scope: str | None = None) -> int:
    """Make every namespace (of ``scope``) with pending candidates due now, whatever its
    debounce, so the next sweep claims it; returns how many were marked. Each namespace is its
    own bulkhead: one whose key Redis refuses is set aside (logged with the reason)."""
    bulkhead = Bulkhead("drain")
    marked = [
        bulkhead.run(ns, lambda n=ns: queue.mark_due(n))  # type: ignore[misc]
        for ns in queue.admin.namespaces()
        if scope is None or scope_of(ns) == scope  # a user of an org is of the user scope
    ]
    return sum(1 for m in marked if m)
