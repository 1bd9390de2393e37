"""Bring dead-lettered batches back: one namespace, or every one whose last error matches.

After an outage that dead-lettered batches anyway (e.g. from a release before outages stopped
counting as attempts, or leases that expired while a dependency hung), the operator fixes the
cause and retries them all at once instead of one ``dlq retry NS`` per namespace.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.queue.redis_queue import RedisQueue


@dataclass(frozen=True)
class Retried:
    """Namespaces brought back (due now), and dead letters left alone by the filter."""

    namespaces: list[str]
    left: int


def retry_dead_letters(queue: RedisQueue, *, error_contains: str | None = None) -> Retried:
    """Retry every dead letter, or only those whose last error contains ``error_contains``
    (case-insensitive); each comes back with a fresh attempt count, due now."""
    wanted = (error_contains or "").casefold()
    retried: list[str] = []
    left = 0
    for letter in queue.dead_letters():
        if wanted and wanted not in (letter.last_error or "").casefold():
            left += 1
            continue
        if queue.retry_dead(letter.namespace):
            retried.append(letter.namespace)
    return Retried(retried, left)
