"""Claim every due namespace, hand each claim to a dispatcher, and report the queue's health;
or make every pending namespace due now (a drain).

The claiming itself (and giving a claim back when it cannot be dispatched) is the queue's
mechanism, :func:`worker.queue.sweep.sweep_due`; this use case adds what a sweep reports.
"""

from __future__ import annotations

from collections.abc import Callable

from worker import metrics
from worker.queue.encoding import to_ms
from worker.queue.redis_queue import Claim, RedisQueue
from worker.queue.sweep import sweep_due


def sweep(
    queue: RedisQueue, dispatch: Callable[[Claim], None], *, now: float | None = None
) -> list[Claim]:
    """Claim and dispatch due namespaces (``now``: epoch seconds, for tests and catch-up tools);
    counts the claims, observes how long each namespace waited past its due time, and
    refreshes the queue-depth gauges."""
    claims = sweep_due(queue, dispatch, now=now)
    metrics.CLAIMS.inc(len(claims))
    # Lag against the clock that set the due times: the Redis server's (``now`` is a test hook).
    metrics.observe_due_lag(claims, to_ms(now) if now is not None else queue.server_ms())
    metrics.refresh_queue_gauges(queue.stats(now=now).scopes)
    return claims


def drain(queue: RedisQueue, *, scope: str | None = None) -> int:
    """Make every namespace (of ``scope``) with pending candidates due now, whatever its
    debounce, so the next sweep claims it; returns how many were marked."""
    prefix = f"{scope}:" if scope is not None else ""
    return sum(1 for ns in queue.namespaces() if ns.startswith(prefix) and queue.mark_due(ns))
