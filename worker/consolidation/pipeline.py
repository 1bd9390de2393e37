"""Consolidate one claimed namespace batch: read → merge → validate → one commit → ack.

This is the one place where the queue, the consolidator and the store meet. Its invariants:

* **Nothing lost.** Candidates leave Redis only through a token-checked ack issued *after* the
  database commit. Any failure before that (consolidator error, invalid plan, database error,
  lost lease, a crash) leaves them in the stream, counted by ``fail`` and retried.
* **No duplicate.** The commit is fenced by the namespace version (optimistic check) and by the
  unique candidate ledger; candidates already recorded (a batch committed whose ack was lost)
  are skipped and simply acknowledged.
* **No half-commit.** Files, entries, ledger, applied position and outbox rows are one
  transaction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import consolidate_batch
from worker.consolidation.types import AppliedPlan, FileChange
from worker.errors import LeaseLost, MemworkerError, StaleVersion
from worker.models import Candidate
from worker.queue.redis_queue import Claim, RedisQueue
from worker.settings import Settings
from worker.store.memory import MemoryStore, RunRecord

log = logging.getLogger(__name__)

#: The lease is renewed three times per lease period, so two missed heartbeats in a row (a GC
#: pause, a slow Redis) still leave the lease held.
HEARTBEATS_PER_LEASE = 3

Outcome = Literal["committed", "nothing_new", "dry_run", "stale", "failed", "dead"]
Trigger = Literal["queue", "reconcile", "schedule", "cli"]


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


@dataclass(frozen=True)
class _Merged:
    """A merged batch before its commit: ``applied`` is None when nothing was new."""

    version: int
    applied: AppliedPlan | None
    result: BatchResult


#: Stream position given to candidates that are not in the log (a preview's re-scan): after
#: any applied position, so only the ledger decides whether they are new.
_AFTER_EVERYTHING = f"{2**63 - 1}-0"


@dataclass(frozen=True)
class Pipeline:
    """The dependencies of a consolidation, passed in explicitly."""

    queue: RedisQueue
    store: MemoryStore
    consolidator: Consolidator
    settings: Settings
    sinks: Sequence[str] = ()
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def consolidate(self, claim: Claim, *, trigger: Trigger = "queue") -> BatchResult:
        """Consolidate the batch ``claim`` covers; see the module docstring for the guarantees."""
        started = self.clock()
        namespace = claim.namespace
        try:
            with _heartbeat(self.queue, claim, self.settings.lease_seconds) as lease_lost:
                result = self._merge_and_commit(claim, trigger, started, lease_lost)
        except StaleVersion as exc:
            # Another batch of this namespace committed first (e.g. a zombie worker's lease was
            # taken over). Give the batch back untouched; the next attempt re-reads the state
            # and skips whatever is already in the ledger.
            self.queue.release(claim)
            self._record_failure(claim, trigger, started, "stale", str(exc))
            return BatchResult(namespace, "stale", error=str(exc))
        except Exception as exc:
            error = _describe(exc)
            log.warning("consolidation of %s failed: %s", namespace, error)
            verdict = self.queue.fail(claim, error)
            self._record_failure(claim, trigger, started, "failed", error)
            return BatchResult(namespace, "dead" if verdict == "dead" else "failed", error=error)
        return result

    def preview(self, namespace: str, extra: Sequence[Candidate] = ()) -> BatchResult:
        """What consolidating ``namespace`` now would change (plus ``extra`` candidates, e.g.
        from a source re-scan), merged in memory only: no lease, no run row, no commit."""
        entries = self.queue.pending(namespace, limit=self.settings.max_batch)
        extra_entries = [(_AFTER_EVERYTHING, c) for c in extra]
        try:
            merged = self._merge(namespace, [*entries, *extra_entries])
        except MemworkerError as exc:
            return BatchResult(namespace, "failed", error=str(exc))
        return (
            merged.result if merged.applied is None else replace(merged.result, outcome="dry_run")
        )

    def _merge(self, namespace: str, entries: Sequence[tuple[str, Candidate]]) -> _Merged:
        """Everything a commit of ``entries`` would write, computed from one read snapshot;
        candidates already committed (applied position or ledger) are skipped."""
        # One read transaction for the state, the files and the ledger lookup. The ledger is
        # asked about every candidate read, a superset of those past the applied position.
        snapshot = self.store.snapshot(namespace, [c.id for _, c in entries])
        state = snapshot.state
        fresh = _not_yet_applied(entries, state.applied_position)
        batch = _unique([c for c in fresh if c.id not in snapshot.recorded])
        skipped = len(entries) - len(batch)
        if not batch:
            return _Merged(
                state.version, None, BatchResult(namespace, "nothing_new", skipped=skipped)
            )
        plan, applied = consolidate_batch(
            self.consolidator,
            state,
            batch,
            now=self.clock(),
            settings=self.settings,
            current_files=snapshot.current_files,
        )
        result = BatchResult(
            namespace=namespace,
            outcome="committed",
            candidates=len(batch),
            skipped=skipped,
            version=state.version,
            counts=dict(applied.counts),
            files=applied.files,
            llm_calls=plan.llm_calls,
            prompt_tokens=plan.prompt_tokens,
            completion_tokens=plan.completion_tokens,
        )
        return _Merged(state.version, applied, result)

    def _merge_and_commit(
        self, claim: Claim, trigger: Trigger, started: datetime, lease_lost: threading.Event
    ) -> BatchResult:
        namespace = claim.namespace
        merged = self._merge(namespace, self.queue.read_batch(claim))
        if merged.applied is None:
            self.queue.ack(claim)
            return merged.result
        applied, done = merged.applied, merged.result
        if lease_lost.is_set():
            raise LeaseLost(f"lease on {namespace} was lost during the merge; not committing")
        commit = self.store.commit_batch(
            namespace=namespace,
            expected_version=merged.version,
            applied_position=claim.covered,
            applied=applied,
            run=self._run(claim, trigger, started, done),
            sinks=self.sinks,
            now=self.clock(),
        )
        if not self.queue.ack(claim):
            # Committed, but the lease moved on: harmless. The next claimer finds every
            # candidate in the ledger and only acknowledges them.
            log.info("ack of %s refused (lease moved on); the commit stands", namespace)
        return replace(done, version=commit.version)

    def _run(
        self, claim: Claim, trigger: Trigger, started: datetime, result: BatchResult
    ) -> RunRecord:
        return RunRecord(
            trigger=trigger,
            namespace=claim.namespace,
            started_at=started,
            finished_at=self.clock(),
            outcome={"committed": "ok"}.get(result.outcome, result.outcome),
            error=result.error,
            candidates=result.candidates,
            counts=dict(result.counts),
            llm_calls=result.llm_calls,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )

    def _record_failure(
        self, claim: Claim, trigger: Trigger, started: datetime, outcome: Outcome, error: str
    ) -> None:
        failed = BatchResult(claim.namespace, outcome, candidates=claim.count, error=error)
        try:
            self.store.record_run(self._run(claim, trigger, started, failed))
        except Exception:  # the failure itself is already counted in Redis
            log.exception("could not record the failed run of %s", claim.namespace)


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


def _describe(exc: BaseException) -> str:
    kind = "" if isinstance(exc, MemworkerError) else f"{type(exc).__name__}: "
    return f"{kind}{exc}"[:2000]


@contextmanager
def _heartbeat(queue: RedisQueue, claim: Claim, lease_seconds: float) -> Iterator[threading.Event]:
    """Extend the lease in the background while the block runs; set the event if it is lost."""
    lost = threading.Event()
    stop = threading.Event()
    interval = lease_seconds / HEARTBEATS_PER_LEASE

    def beat() -> None:
        while not stop.wait(interval):
            try:
                if not queue.extend(claim, now=time.time()):
                    lost.set()
                    return
            except Exception:  # a Redis blip: the next beat tries again
                log.warning("heartbeat for %s failed", claim.namespace, exc_info=True)

    thread = threading.Thread(target=beat, name=f"heartbeat:{claim.namespace}", daemon=True)
    thread.start()
    try:
        yield lost
    finally:
        stop.set()
        thread.join()
