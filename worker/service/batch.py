"""A batch's result, and a preview's merge of queued entries, for the consolidate hub (which
commits the merge) and :mod:`.preview` (which only shows it), so a preview is exactly what a
commit would do. What stream ids and epochs mean is the queue's (:mod:`worker.queue.types`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import Limits, Merge, merge_new
from worker.models import Candidate
from worker.outcomes import Outcome
from worker.queue.types import arrived, reissued
from worker.store.memory import MemoryStore
from worker.values import AppliedPlan, FileChange


@dataclass(frozen=True)
class BatchResult:
    """What one consolidation did, for logs, metrics, the CLI and the Celery result."""

    namespace: str
    outcome: Outcome
    candidates: int = 0
    skipped: int = 0
    version: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    files: tuple[FileChange, ...] = ()
    error: str | None = None
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @classmethod
    def of(cls, namespace: str, merge: Merge, version: int) -> BatchResult:
        """The result of ``merge``, from the namespace's ``version``: nothing new, or committed
        (until the commit says otherwise)."""
        if merge.plan is None or merge.applied is None:
            return cls(namespace, Outcome.NOTHING_NEW, skipped=merge.skipped)
        return cls(
            namespace=namespace,
            outcome=Outcome.COMMITTED,
            candidates=len(merge.batch),
            skipped=merge.skipped,
            version=version,
            counts=dict(merge.applied.counts),
            files=merge.applied.files,
            llm_calls=merge.plan.llm_calls,
            prompt_tokens=merge.plan.prompt_tokens,
            completion_tokens=merge.plan.completion_tokens,
        )

    def summary(self) -> dict[str, object]:
        """JSON-ready, without file contents (the Celery task's result)."""
        return {
            "namespace": self.namespace,
            "outcome": self.outcome.value,
            "candidates": self.candidates,
            "skipped": self.skipped,
            "version": self.version,
            "counts": self.counts,
            "files": [change.path for change in self.files],
            "error": self.error,
        }


@dataclass(frozen=True)
class Merged:
    """A merged batch before its commit: ``applied`` is None when nothing was new."""

    version: int
    applied: AppliedPlan | None
    result: BatchResult
    #: SQL's applied position when the batch was read (``<epoch>/<stream id>``).
    applied_position: str | None = None
    #: Entries at or below that position, in its epoch, that the ledger does not hold: ids a
    #: healthy Redis never issues twice, so Redis was rolled back to an older snapshot.
    rolled_back: int = 0


def merge_entries(
    store: MemoryStore,
    consolidator: Consolidator,
    limits: Limits,
    namespace: str,
    entries: Sequence[tuple[str, Candidate]],
    *,
    now: datetime,
    epoch: str | None = None,
) -> Merged:
    """Everything a commit of ``entries`` (stream id, candidate) would write, computed from one
    read snapshot; candidates the ledger already holds are skipped (a preview's merge: the
    consolidate hub makes the same calls itself, between its lease and its commit).

    **The ledger is the proof.** A candidate is skipped only because the unique ledger holds
    it, never because its stream id lies at or below the applied position: a Redis restored
    from an older snapshot keeps its epoch and issues those ids again, to new candidates. The
    position only tells such a rollback apart (``Merged.rolled_back``, in the same ``epoch``).
    """
    # One read transaction for the state, the files and the ledger lookup.
    snapshot = store.snapshot(namespace, [c.id for _, c in entries])
    state = snapshot.state
    merge = merge_new(
        consolidator, state, arrived(entries), recorded=snapshot.recorded,
        current_files=snapshot.current_files, now=now, settings=limits,
    )  # fmt: skip
    rolled_back = reissued(entries, snapshot.recorded, state.applied_position, epoch)
    result = BatchResult.of(namespace, merge, state.version)
    return Merged(state.version, merge.applied, result, state.applied_position, rolled_back)
