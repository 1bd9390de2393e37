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
* **Never pinned.** The heartbeat stops extending the lease once a merge has run past
  ``max_merge_seconds``, so another worker can take a stuck namespace over; the stuck worker
  then refuses to commit (and the database fence refuses it anyway if the other one did).
* **Outages are not poison.** A failure because a dependency was unreachable
  (:class:`~worker.errors.Unavailable`: the database, Redis, a model provider) retries with a
  capped backoff and never counts toward dead-lettering; only failures of the batch itself
  (an invalid plan, a consolidator error) do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from worker.consolidation.base import Consolidator
from worker.consolidation.engine import merge_new
from worker.errors import (
    LeaseLost,
    MemworkerError,
    StaleVersion,
    StoreUnavailable,
    Unavailable,
    describe_error,
)
from worker.models import Candidate
from worker.outcomes import Outcome
from worker.queue.redis_queue import Claim, RedisQueue
from worker.queue.types import arrived
from worker.service.batch import BatchResult
from worker.service.edit_check import EditCheck
from worker.service.embed import EntryEmbedder
from worker.service.report import observe_batch, observe_positions
from worker.slices import ConsolidationSettings
from worker.store.memory import MemoryStore, RunRecord

log = logging.getLogger(__name__)

#: The lease is renewed three times per lease period, so two missed heartbeats in a row (a GC
#: pause, a slow Redis) still leave the lease held.
HEARTBEATS_PER_LEASE = 3

Trigger = Literal["queue", "reconcile", "schedule", "cli"]


def _nothing_after_commit() -> None:
    return None


@dataclass(frozen=True)
class Pipeline:
    """The dependencies of a consolidation, passed in explicitly.

    ``after_commit`` is called after each commit when sinks are configured, so a deliverer
    publishes it soon (the Celery app sends the delivery task to its own lane). ``embedder``
    (embeddings configured) then embeds the namespace's new entries: after the commit and the
    ack, never inside the transaction, and it never fails the batch. ``edits`` (a sink that
    reads agents' direct edits back, ``MEMWORKER_DIRECT_EDITS``) adds the candidates of the
    namespace's unmerged agent edits to each batch (:mod:`.edit_check`). ``clock`` is a test's
    injected time; without it every time this writes (run rows, versions, outbox rows that
    other workers compare) is the database's clock, never this host's.
    """

    queue: RedisQueue
    store: MemoryStore
    consolidator: Consolidator
    settings: ConsolidationSettings
    sinks: Sequence[str] = ()
    clock: Callable[[], datetime] | None = None
    after_commit: Callable[[], None] = _nothing_after_commit
    embedder: EntryEmbedder | None = None
    edits: EditCheck | None = None

    def now(self) -> datetime:
        """The injected clock's time, else the database's (one authority for SQL-side times)."""
        return self.clock() if self.clock is not None else self.store.db_now()

    def agent_edits(self, namespace: str, *, queued: int = 0) -> list[Candidate]:
        """The candidates of ``namespace``'s agent edits not yet merged (none without
        ``edits``), no more than the pending cap leaves beside ``queued`` candidates (agent
        edits count against it like any candidate); reads the store within the check's
        deadline, never raises for it."""
        if self.edits is None:
            return []
        room = self.queue.settings.queue_policy.max_pending - queued
        return self.edits.collect(self.store, namespace, now=self.now(), room=room)

    def consolidate(self, claim: Claim, *, trigger: Trigger = "queue") -> BatchResult:
        """Consolidate the batch ``claim`` covers; see the module docstring for the guarantees."""
        began = time.perf_counter()
        result = self._attempt(claim, trigger)
        observe_batch(result, time.perf_counter() - began)
        if result.outcome is Outcome.COMMITTED and self.sinks:
            self.after_commit()
        if result.outcome is Outcome.COMMITTED and self.embedder is not None:
            self.embedder.embed_namespace(claim.namespace)
        return result

    def _attempt(self, claim: Claim, trigger: Trigger) -> BatchResult:
        # The batch's start: the injected clock's, else the database's, read with the
        # snapshot (inside the try: it is a database call, and an outage there is an outage
        # like any other, retried, never dead-lettered).
        began = _Began(self.clock() if self.clock is not None else None)
        namespace = claim.namespace
        try:
            with _heartbeat(
                self.queue,
                claim,
                self.queue.settings.lease_seconds,
                self.settings.max_merge_seconds,
            ) as lease_lost:
                return self._merge_and_commit(claim, trigger, began, lease_lost)
        except StaleVersion as exc:
            # Another batch of this namespace committed first (e.g. a zombie worker's lease was
            # taken over). Give the batch back untouched; the next attempt re-reads the state
            # and skips whatever is already in the ledger. A namespace erased meanwhile gets no
            # run row: nothing of an erased user is written after the erase.
            self.queue.release(claim)
            return self._failed(
                claim, trigger, began.at, Outcome.STALE, str(exc), record=not self._erased(claim)
            )
        except Unavailable as exc:
            # Not the batch's fault: retry until the dependency is back, never dead-letter.
            error = describe_error(exc)
            log.warning("consolidation of %s waits for a dependency: %s", namespace, error)
            self.queue.outage(claim, error)
            # The database failed before its clock was read: no run row (it would fail too).
            database_down = began.at is None and isinstance(exc, StoreUnavailable)
            return self._failed(
                claim, trigger, began.at, Outcome.FAILED, error, record=not database_down
            )
        except Exception as exc:
            error = describe_error(exc)
            log.warning("consolidation of %s failed: %s", namespace, error)
            verdict = self.queue.fail(claim, error)
            outcome = Outcome.DEAD if verdict == "dead" else Outcome.FAILED
            return self._failed(claim, trigger, began.at, outcome, error)

    def _merge_and_commit(
        self, claim: Claim, trigger: Trigger, began: _Began, lease_lost: threading.Event
    ) -> BatchResult:
        namespace = claim.namespace
        entries = self.queue.read_batch(claim)
        # Agent edits are not in the log: the edit record in SQL holds them until the ledger
        # does, and the ledger skips them once merged, so a failed batch loses nothing and a
        # repeat adds none.
        queued = arrived(entries)
        candidates = [*queued, *self.agent_edits(namespace, queued=len(queued))]
        # One read transaction for the state, the files, the ledger lookup and the batch's
        # start on the database's clock (unless a clock is injected).
        snapshot = self.store.snapshot(
            namespace, [c.id for c in candidates], read_clock=began.at is None
        )
        started = began.at = began.at or snapshot.now
        assert started is not None, "the snapshot read the database's clock"
        state = snapshot.state
        merge = merge_new(
            self.consolidator, state, candidates, recorded=snapshot.recorded,
            current_files=snapshot.current_files, settings=self.settings,
            # The batch's start time serves the merge too: one clock read fewer per batch
            # (each is a round trip), and nothing compares the two.
            now=started,
        )  # fmt: skip
        observe_positions(
            namespace, claim.check(entries, snapshot.recorded, state.applied_position)
        )
        result = BatchResult.of(namespace, merge, state.version)
        if merge.applied is not None:
            if lease_lost.is_set():
                raise LeaseLost(f"lease on {namespace} was lost during the merge; not committing")
            # The run's end and the commit's time: the injected clock, else the database's
            # clock read inside the commit transaction (None), which saves a transaction.
            finished = self.clock() if self.clock is not None else None
            commit = self.store.commit_batch(
                namespace=namespace,
                expected_version=state.version,
                applied_position=claim.position,
                applied=merge.applied,
                run=self._run(claim, trigger, started, finished, result),
                sinks=self.sinks,
                now=finished,
            )
            result = replace(result, version=commit.version)
        # One ack, after the commit or for a batch with nothing new (all in the ledger).
        if not self.queue.ack(claim) and merge.applied is not None:
            # Committed, but the lease moved on: harmless. The next claimer finds every
            # candidate in the ledger and only acknowledges them.
            log.info("ack of %s refused (lease moved on); the commit stands", namespace)
        return result

    def _run(
        self,
        claim: Claim,
        trigger: Trigger,
        started: datetime,
        finished: datetime | None,
        result: BatchResult,
    ) -> RunRecord:
        outcome = result.outcome.run_outcome
        assert outcome is not None, f"{result.outcome} writes no run row"
        return RunRecord(
            trigger=trigger,
            namespace=claim.namespace,
            started_at=started,
            finished_at=finished,
            outcome=outcome,
            error=result.error,
            candidates=result.candidates,
            counts=dict(result.counts),
            llm_calls=result.llm_calls,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
        )

    def _erased(self, claim: Claim) -> bool:
        """Whether the claim's namespace was erased (best effort: a store outage says no)."""
        try:
            return self.store.was_erased(claim.namespace)
        except MemworkerError:
            return False

    def _failed(
        self,
        claim: Claim,
        trigger: Trigger,
        started: datetime | None,
        outcome: Outcome,
        error: str,
        *,
        record: bool = True,
    ) -> BatchResult:
        """The failed attempt's result, recorded as a run row (best effort) when ``record``.

        ``started`` is None when the attempt failed before the batch's start was read (with
        the snapshot): the run then starts and ends at the failure, on the database's clock.
        """
        failed = BatchResult(claim.namespace, outcome, candidates=claim.count, error=error)
        if not record:
            return BatchResult(claim.namespace, outcome, error=error)
        try:
            finished = self.now()
            run = self._run(claim, trigger, started or finished, finished, failed)
            self.store.record_run(run)
        except MemworkerError as exc:  # the failure itself is already counted in Redis
            log.warning("could not record the failed run of %s: %s", claim.namespace, exc)
        except Exception:
            log.exception("could not record the failed run of %s", claim.namespace)
        return BatchResult(claim.namespace, outcome, error=error)


@dataclass
class _Began:
    """When an attempt began, once known: set from the injected clock at once, or from the
    database's clock read with the batch's snapshot."""

    at: datetime | None = None


@contextmanager
def _heartbeat(
    queue: RedisQueue, claim: Claim, lease_seconds: float, max_seconds: float
) -> Iterator[threading.Event]:
    """Extend the lease in the background while the block runs, for at most ``max_seconds``;
    set the event if the lease is lost or the cap is reached (the block must not commit)."""
    lost = threading.Event()
    stop = threading.Event()
    interval = lease_seconds / HEARTBEATS_PER_LEASE
    cap = time.monotonic() + max_seconds

    def beat() -> None:
        while not stop.wait(interval):
            if time.monotonic() >= cap:
                log.error(
                    "merge of %s ran past max_merge_seconds (%.0f s); no longer extending its "
                    "lease, so another worker takes it over, and this one will not commit",
                    claim.namespace,
                    max_seconds,
                )
                lost.set()
                return
            try:
                if not queue.extend(claim):  # server time: a skewed host cannot shorten it
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
