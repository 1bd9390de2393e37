"""Merge a namespace's batch from one read snapshot: what a commit of it would write.

Shared by :mod:`.consolidate` (which commits the result) and :mod:`.preview` (which only
shows it), so a preview is exactly what a commit would do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import Limits, consolidate_batch
from worker.models import Candidate
from worker.outcomes import Outcome
from worker.store.memory import MemoryStore
from worker.values import AppliedPlan, FileChange

#: Stream position given to candidates that are not in the log (a preview's re-scan): after
#: any applied position, so only the ledger decides whether they are new.
AFTER_EVERYTHING = f"{2**63 - 1}-0"


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


def merge_entries(
    store: MemoryStore,
    consolidator: Consolidator,
    limits: Limits,
    namespace: str,
    entries: Sequence[tuple[str, Candidate]],
    *,
    now: datetime,
) -> Merged:
    """Everything a commit of ``entries`` (stream id, candidate) would write, computed from one
    read snapshot; candidates already committed (applied position or ledger) are skipped."""
    # One read transaction for the state, the files and the ledger lookup. The ledger is
    # asked about every candidate read, a superset of those past the applied position.
    snapshot = store.snapshot(namespace, [c.id for _, c in entries])
    state = snapshot.state
    fresh = _not_yet_applied(entries, state.applied_position)
    batch = _unique([c for c in fresh if c.id not in snapshot.recorded])
    skipped = len(entries) - len(batch)
    if not batch:
        nothing = BatchResult(namespace, Outcome.NOTHING_NEW, skipped=skipped)
        return Merged(state.version, None, nothing)
    plan, applied = consolidate_batch(
        consolidator, state, batch, now=now, settings=limits, current_files=snapshot.current_files
    )
    result = BatchResult(
        namespace=namespace,
        outcome=Outcome.COMMITTED,
        candidates=len(batch),
        skipped=skipped,
        version=state.version,
        counts=dict(applied.counts),
        files=applied.files,
        llm_calls=plan.llm_calls,
        prompt_tokens=plan.prompt_tokens,
        completion_tokens=plan.completion_tokens,
    )
    return Merged(state.version, applied, result)


def _stream_position(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def _not_yet_applied(
    entries: Sequence[tuple[str, Candidate]], applied_position: str | None
) -> list[Candidate]:
    """Candidates after the namespace's applied log position (a committed-but-unacked batch)."""
    if applied_position is None:
        return [c for _, c in entries]
    applied = _stream_position(applied_position)
    return [c for sid, c in entries if _stream_position(sid) > applied]


def _unique(batch: Sequence[Candidate]) -> list[Candidate]:
    """First occurrence of each candidate id: a retried capture enqueued twice merges once."""
    seen: set[str] = set()
    out = []
    for candidate in batch:
        if candidate.id not in seen:
            seen.add(candidate.id)
            out.append(candidate)
    return out
