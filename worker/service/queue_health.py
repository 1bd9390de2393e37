"""Is the queue's Redis keeping its promises? Durability settings and epoch changes.

For ``memworker status``: Redis's AOF and eviction settings (with what each risk means),
whether the epochs SQL recorded with recent commits still match the shards' epochs in Redis,
and whether, within the same epoch, SQL holds positions Redis never issued (a rollback).
A mismatch means Redis lost its data since those commits (restart without AOF, ``FLUSHALL``,
eviction, failover to a stale replica): nothing new is skipped because of it (positions are
only compared within an epoch), but candidates that were queued and not yet committed then
are gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

from worker.queue.beat_lock import beat_holder
from worker.queue.types import applied_stream_position, epoch_of

if TYPE_CHECKING:
    from worker.queue.admin import QueueAdmin

#: Recently committed namespaces compared; enough to notice a lost Redis, cheap to read.
EPOCH_SAMPLE: Final = 500


class CommittedPositions(Protocol):
    """What the epoch check reads from SQL: the memory store, or its health figures alone."""

    def recent_positions(self, limit: int = ...) -> list[tuple[str, str]]: ...


def queue_health(queue: QueueAdmin, store: CommittedPositions) -> dict[str, Any]:
    """Durability settings plus ``epoch``: namespaces whose last commit was in another epoch."""
    epochs = queue.epochs()
    stale, same = [], {}
    for namespace, position in store.recent_positions(EPOCH_SAMPLE):
        recorded = epoch_of(position)
        if recorded is not None and recorded != epochs[queue.layout.shard(namespace)]:
            stale.append(namespace)
        elif recorded is not None:
            same[namespace] = applied_stream_position(position)
    issued = queue.last_issued(list(same))
    rolled_back = [ns for ns, applied in same.items() if applied > issued[ns]]
    epoch: dict[str, Any] = {
        "changed": bool(stale),
        "namespaces_from_an_earlier_epoch": len(stale),
    }
    rollback: dict[str, Any] = {"detected": bool(rolled_back), "namespaces": len(rolled_back)}
    if rolled_back:
        rollback["meaning"] = (
            "SQL committed queue positions this Redis never issued: it was restored from an "
            "older snapshot (or a stale replica took over). Candidates queued after that "
            "snapshot and not yet committed are gone; nothing enqueued since is skipped"
        )
    if stale:
        epoch["meaning"] = (
            "Redis lost its data since these namespaces were last committed (restart without "
            "AOF, flush, eviction or a stale failover): candidates queued then and not yet "
            "committed are gone; nothing enqueued since is skipped"
        )
    return {
        "durability": queue.durability().as_dict(),
        "epoch": epoch,
        "rollback": rollback,
        "beat": beat_holder(queue.redis, queue.settings.key_prefix),
        "cluster_primaries": queue.cluster_primaries(),
    }
