"""The dead-letter queue: bring batches back (one namespace, or every one whose last error
matches), or drop one's pending candidates for good.

After an outage that dead-lettered batches anyway (e.g. from a release before outages stopped
counting as attempts, or leases that expired while a dependency hung), the operator fixes the
cause and retries them all at once instead of one ``dlq retry NS`` per namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from worker.errors import NotFound
from worker.queue.admin import QueueAdmin
from worker.service.progress import Progress, no_progress


@dataclass(frozen=True)
class Retried:
    """Namespaces brought back (due now), and dead letters left alone by the filter."""

    namespaces: list[str]
    left: int


def retry_dead_letters(
    queue: QueueAdmin, *, error_contains: str | None = None, progress: Progress = no_progress
) -> Retried:
    """Retry every dead letter, or only those whose last error contains ``error_contains``
    (case-insensitive); each comes back with a fresh attempt count, due now. ``progress`` is
    told each namespace retried."""
    wanted = (error_contains or "").casefold()
    letters = queue.dead_letters()
    chosen = [
        letter.namespace
        for letter in letters
        if not wanted or wanted in (letter.last_error or "").casefold()
    ]
    retried: list[str] = []
    with progress(len(chosen)) as advance:
        for namespace in chosen:
            if queue.retry_dead(namespace):
                retried.append(namespace)
            advance(namespace)
    return Retried(retried, len(letters) - len(chosen))


def retry_dead_letter(queue: QueueAdmin, namespace: str) -> int:
    """Bring ``namespace`` back with a fresh attempt count, due now; returns its pending
    candidates. :class:`NotFound` when it is not dead-lettered."""
    if not queue.retry_dead(namespace):
        raise NotFound(
            f"{namespace} is not dead-lettered, so there is nothing to retry; "
            "`memworker dlq list` shows the dead letters"
        )
    return queue.namespace_state(namespace).pending


def drop_dead_letter(queue: QueueAdmin, namespace: str, *, confirm: Callable[[int], None]) -> int:
    """Delete the pending candidates of dead-lettered ``namespace`` for good, once ``confirm``
    (handed their count) returns; returns how many were dropped. :class:`NotFound` when it is
    not dead-lettered (nothing is dropped)."""
    state = queue.namespace_state(namespace)
    if not state.dead:
        raise NotFound(
            f"{namespace} is not dead-lettered, so nothing was dropped; only dead letters can be "
            "dropped (`memworker dlq list` shows them)"
        )
    confirm(state.pending)
    return queue.drop_dead(namespace)
