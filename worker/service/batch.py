"""Merge a namespace's batch from one read snapshot: what a commit of it would write.

Shared by :mod:`.consolidate` (which commits the result) and :mod:`.preview` (which only
shows it), so a preview is exactly what a commit would do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import Limits, consolidate_batch
from worker.models import Candidate
from worker.outcomes import Outcome
from worker.queue.types import epoch_of as epoch_of  # noqa: PLC0414 - re-exported: the queue owns the position format
from worker.queue.types import stream_position
from worker.store.memory import MemoryStore
from worker.values import AppliedPlan, FileChange

#: Stream position given to candidates that are not in the log (a preview's re-scan): after
#: any applied position, so only the ledger decides whether they are new.
AFTER_EVERYTHING = f"{2**63 - 1}-0"

#: Where stream ids count their milliseconds from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Arrivals within one millisecond are ordered by their id's sequence number, as microseconds;
#: past 999 in one millisecond (1,000 candidates of one namespace) the order is by id instead.
MAX_SEQ_MICROS = 999


def epoch_changed(applied_position: str | None, epoch: str | None) -> bool:
    """True when SQL's applied position was recorded in another epoch than ``epoch``, the one
    the claim was made in: Redis lost its data since (restart without AOF, flush, eviction,
    failover to a stale replica)."""
    recorded = epoch_of(applied_position)
    return recorded is not None and epoch is not None and recorded != epoch


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
    read snapshot; candidates the ledger already holds are skipped.

    **The ledger is the proof.** A candidate is skipped only because the unique ledger holds
    it, never because its stream id lies at or below the applied position: a Redis restored
    from an older snapshot keeps its epoch and issues those ids again, to new candidates. The
    position only tells such a rollback apart (``Merged.rolled_back``, in the same ``epoch``).
    """
    # One read transaction for the state, the files and the ledger lookup.
    snapshot = store.snapshot(namespace, [c.id for _, c in entries])
    state = snapshot.state
    fresh = [(sid, c) for sid, c in arrived(entries) if c.id not in snapshot.recorded]
    batch = _unique([c for _, c in fresh])
    skipped = len(entries) - len(batch)
    rolled_back = reissued(fresh, state.applied_position, epoch)
    if not batch:
        nothing = BatchResult(namespace, Outcome.NOTHING_NEW, skipped=skipped)
        return Merged(state.version, None, nothing, state.applied_position, rolled_back)
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
    return Merged(state.version, applied, result, state.applied_position, rolled_back)


def arrived(entries: Sequence[tuple[str, Candidate]]) -> list[tuple[str, Candidate]]:
    """Each candidate stamped with its arrival on the Redis server (its stream id's ms).

    The consolidator orders candidates and decides "newer wins" for a key by ``created_at``;
    stamping the server's arrival time there makes that the queue's arrival order, so a chat
    host whose clock runs fast or slow cannot make its value win or lose. The client's own
    stamp stays in the queue's log entry. Entries without a stream id (a preview's extra
    candidates) keep theirs.
    """
    out = []
    for sid, candidate in entries:
        if sid == AFTER_EVERYTHING:
            out.append((sid, candidate))
            continue
        ms, seq = stream_position(sid)
        # The id's sequence number as microseconds keeps arrivals of one millisecond in order.
        at = EPOCH + timedelta(milliseconds=ms, microseconds=min(seq, MAX_SEQ_MICROS))
        out.append((sid, candidate.model_copy(update={"created_at": at})))
    return out


def reissued(
    entries: Sequence[tuple[str, Candidate]], applied_position: str | None, epoch: str | None
) -> int:
    """How many of ``entries`` (none of them in the ledger) have stream ids at or below the
    applied position of the same ``epoch``: ids a healthy Redis never hands out again, since
    every id at or below that position was committed (and is in the ledger).

    >>> from worker.models import make_candidate
    >>> c = make_candidate(user_id="u1", trace_id="t", text="I prefer tea")
    >>> reissued([("5-0", c), ("9-0", c)], "e1/7-0", "e1"), reissued([("5-0", c)], "e1/7-0", "e2")
    (1, 0)
    """
    recorded = epoch_of(applied_position)
    if applied_position is None or recorded is None or recorded != epoch:
        return 0
    applied = stream_position(applied_position.rpartition("/")[2])
    return sum(
        1 for sid, _ in entries if sid != AFTER_EVERYTHING and stream_position(sid) <= applied
    )


def _unique(batch: Sequence[Candidate]) -> list[Candidate]:
    """First occurrence of each candidate id: a retried capture enqueued twice merges once."""
    seen: set[str] = set()
    out = []
    for candidate in batch:
        if candidate.id not in seen:
            seen.add(candidate.id)
            out.append(candidate)
    return out
