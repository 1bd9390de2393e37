"""What consolidating a namespace now would change, merged in memory only.

No lease, no run row, no commit: safe beside running workers. ``extra`` candidates (e.g. from
a source re-scan that was not enqueued) are merged as if they were queued.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import Limits
from worker.errors import MemworkerError
from worker.models import Candidate
from worker.outcomes import Outcome
from worker.queue.admin import QueueAdmin
from worker.queue.types import AFTER_EVERYTHING
from worker.service.batch import BatchResult, merge_entries
from worker.store.memory import MemoryStore


def preview(
    queue: QueueAdmin,
    store: MemoryStore,
    consolidator: Consolidator,
    limits: Limits,
    namespace: str,
    *,
    extra: Sequence[Candidate] = (),
    max_batch: int,
    now: datetime,
) -> BatchResult:
    """The batch a claim of ``namespace`` would cover (at most ``max_batch`` queued candidates)
    plus ``extra``, merged: outcome ``dry_run`` with the diffs when something would change,
    ``nothing_new`` when nothing would, ``failed`` with the error when the merge fails."""
    entries = queue.pending(namespace, limit=max_batch)
    extra_entries = [(AFTER_EVERYTHING, c) for c in extra]
    try:
        merged = merge_entries(
            store, consolidator, limits, namespace, [*entries, *extra_entries], now=now
        )
    except MemworkerError as exc:
        return BatchResult(namespace, Outcome.FAILED, error=str(exc))
    if merged.applied is None:
        return merged.result
    return replace(merged.result, outcome=Outcome.PREVIEWED)
