"""A batch's result, and the stream positions a batch is read at, for the consolidate hub
(which commits the merge) and :mod:`.preview` (which only shows it), so a preview is exactly
what a commit would do.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import Limits, Merge, merge_new
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


def arrived(entries: Sequence[tuple[str, Candidate]]) -> list[Candidate]:
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
            out.append(candidate)
            continue
        ms, seq = stream_position(sid)
        # The id's sequence number as microseconds keeps arrivals of one millisecond in order.
        at = EPOCH + timedelta(milliseconds=ms, microseconds=min(seq, MAX_SEQ_MICROS))
        out.append(candidate.model_copy(update={"created_at": at}))
    return out


def reissued(
    entries: Sequence[tuple[str, Candidate]],
    recorded: Set[str],
    applied_position: str | None,
    epoch: str | None,
) -> int:
    """How many of ``entries`` that the ledger does not hold (``recorded``) have stream ids at
    or below the applied position of the same ``epoch``: ids a healthy Redis never hands out
    again, since every id at or below that position was committed (and is in the ledger).

    >>> from worker.models import make_candidate
    >>> c = make_candidate(user_id="u1", trace_id="t", text="I prefer tea")
    >>> reissued([("5-0", c), ("9-0", c)], set(), "e1/7-0", "e1")
    1
    >>> reissued([("5-0", c)], set(), "e1/7-0", "e2")
    0
    >>> reissued([("5-0", c)], {c.id}, "e1/7-0", "e1")
    0
    """
    applied_epoch = epoch_of(applied_position)
    if applied_position is None or applied_epoch is None or applied_epoch != epoch:
        return 0
    applied = stream_position(applied_position.rpartition("/")[2])
    return sum(
        1
        for sid, c in entries
        if sid != AFTER_EVERYTHING and c.id not in recorded and stream_position(sid) <= applied
    )
