"""Consolidating a namespace: the claimed batch's hub, its result and metrics, a preview, and
reconcile by hand.

:meth:`Pipeline.consolidate` consolidates one claimed namespace batch: read → merge → validate
→ one commit → ack. It is the one place where the queue, the consolidator and the store meet.
Its invariants:

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

:func:`preview` shows what consolidating a namespace now would change, through the same
:func:`merge_entries` a commit's merge makes, in memory only: no lease, no run row, no commit,
so it is safe beside running workers. :func:`reconcile_namespace` consolidates one namespace
now, by hand, through the same claim and fence as the workers: a namespace a worker holds is
reported, not touched, and the database fence and the unique ledger keep anything from being
merged twice. Results become metrics in one place, :func:`observe_batch`. What stream ids and
epochs mean is the queue's (:mod:`worker.queue.redis_queue`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final, Literal

import redis

from worker import metrics
from worker.connectors.base import Sink
from worker.consolidation.plan import Consolidator, Limits, Merge, merge_new
from worker.errors import (
    LeaseLost,
    MemworkerError,
    NotFound,
    QueueUnavailable,
    StaleVersion,
    StoreUnavailable,
    Unavailable,
    describe_error,
)
from worker.models import AppliedPlan, Candidate, FileChange, Namespace
from worker.queue.admin import QueueAdmin
from worker.queue.redis_queue import (
    AFTER_EVERYTHING,
    Claim,
    PositionCheck,
    RedisQueue,
    arrived,
    reissued,
)
from worker.service.bulkhead import Bulkhead, Progress, no_progress
from worker.service.edits import EditCheck
from worker.service.publish import DeliveryReport, publish_now
from worker.service.scan import SourceScan
from worker.service.search import EntryEmbedder
from worker.store.memory import MemoryStore, RunRecord
from worker.types import ConsolidationSettings, Outcome


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


log = logging.getLogger(__name__)

_reported_epochs: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


def observe_batch(result: BatchResult, seconds: float) -> None:
    """Count one consolidation attempt: its outcome, its time, its model use, a failure."""
    metrics.CONSOLIDATION_SECONDS.observe(seconds)
    metrics.CONSOLIDATIONS.labels(outcome=result.outcome.value).inc()
    if result.outcome.undone:
        metrics.FAILURES.labels(stage="consolidate").inc()
    metrics.LLM_CALLS.inc(result.llm_calls)
    metrics.LLM_TOKENS.labels(kind="input").inc(result.prompt_tokens)
    metrics.LLM_TOKENS.labels(kind="output").inc(result.completion_tokens)
    log.log(
        logging.WARNING if result.outcome.undone else logging.INFO,
        "%s",
        describe_batch(result, seconds),
    )


def describe_batch(result: BatchResult, seconds: float) -> str:
    """One line per consolidation, for the worker's log.

    >>> from worker.types import Outcome
    >>> describe_batch(BatchResult("user:u1", Outcome.COMMITTED, candidates=3, version=2,
    ...                            counts={"added": 2, "unchanged": 1}), 0.042)
    'user:u1 committed v2: 3 candidate(s), added 2, unchanged 1 (0.04 s)'
    """
    parts = [f"{result.candidates} candidate(s)"]
    parts += [f"{kind} {n}" for kind, n in sorted(result.counts.items()) if n]
    if result.llm_calls:
        parts.append(f"{result.llm_calls} model call(s)")
    version = f" v{result.version}" if result.version is not None else ""
    line = f"{result.namespace} {result.outcome.value}{version}: {', '.join(parts)}"
    if result.error:
        line += f"; {result.error[:300]}"
    return f"{line} ({seconds:.2f} s)"


def observe_positions(namespace: str, check: PositionCheck) -> None:
    """Alarm when the queue lost its data (another epoch) or was rolled back (ids of the same
    epoch issued again to candidates that the ledger does not hold)."""
    if check.epoch_changed:
        _observe_epoch_change(namespace, check.recorded_epoch, check.epoch)
    elif check.reissued:
        _observe_rollback(namespace, check.reissued, check.applied_position)


def _observe_epoch_change(namespace: str, recorded: str | None, current: str | None) -> None:
    """Count a batch whose namespace was last committed in another queue epoch; log it at
    ERROR once per (old, new) epoch pair in this process, saying what it means."""
    metrics.QUEUE_EPOCH_CHANGES.inc()
    pair = (recorded or "?", current or "?")
    with _reported_lock:
        if pair in _reported_epochs:
            return
        _reported_epochs.add(pair)
    log.error(
        "queue epoch changed from %s to %s (first seen on %s): Redis lost its data since the "
        "last commit (restarted without AOF, flushed, evicted keys, or failed over to a stale "
        "replica). Candidates acknowledged to clients but not yet committed then are gone; "
        "nothing new is skipped (the ledger decides). Check Redis persistence "
        "(`memworker status`)",
        pair[0],
        pair[1],
        namespace,
    )


def _observe_rollback(namespace: str, reissued: int, applied_position: str | None) -> None:
    """Count a batch whose new candidates carry stream ids at or below SQL's applied position
    in the same epoch: Redis was restored from an older snapshot. Logged at ERROR, like an
    epoch change; the candidates are merged all the same (the ledger decides)."""
    metrics.QUEUE_EPOCH_CHANGES.inc()
    metrics.QUEUE_ROLLBACKS.inc()
    log.error(
        "queue rolled back on %s: %d new candidate(s) got stream ids at or below the position "
        "SQL last committed (%s) in the same epoch, so Redis was restored from an older "
        "snapshot (or a stale replica took over). Candidates queued after that snapshot and "
        "not yet committed are gone; the new ones are merged (the ledger decides). Check Redis "
        "persistence (`memworker status`)",
        namespace,
        reissued,
        applied_position,
    )


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
    namespace's unmerged agent edits to each batch (:mod:`.edits`). ``clock`` is a test's
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


#: Failures that end ``reconcile --all`` at once instead of setting one namespace aside: Redis
#: or the database is down, so every namespace after it would fail alike, and the operator is
#: owed the outage's own exit code (4), not a page of namespaces that each "failed".
OUTAGES: Final = (QueueUnavailable, StoreUnavailable, redis.ConnectionError, redis.TimeoutError)

#: Why a leased namespace was left alone.
LEASED_NOTE = (
    "being consolidated by a worker now; that worker commits it (candidates that arrived "
    "meanwhile are merged in the next batch)"
)


@dataclass(frozen=True)
class Reconciled:
    """What reconcile did for one namespace (``result`` when it consolidated or previewed)."""

    namespace: str
    outcome: Outcome
    result: BatchResult | None = None
    note: str | None = None


def reconcile_namespace(
    pipeline: Pipeline,
    namespace: str,
    *,
    dry_run: bool = False,
    extra: Sequence[Candidate] = (),
    now: datetime,
) -> Reconciled:
    """Consolidate (or, with ``dry_run``, preview with ``extra`` candidates) ``namespace``."""
    queue = pipeline.queue
    state = queue.admin.namespace_state(namespace)
    if state.leased:
        return Reconciled(namespace, Outcome.LEASED, note=LEASED_NOTE)
    if state.dead:
        return Reconciled(
            namespace,
            Outcome.DEAD_LETTERED,
            note=f"dead-lettered after {state.attempts} attempt(s) (last error: "
            f"{state.last_error or 'none recorded'}); `memworker dlq retry {namespace}` brings it "
            "back",
        )
    if dry_run:
        result = preview(
            queue.admin,
            pipeline.store,
            pipeline.consolidator,
            pipeline.settings,
            namespace,
            extra=extra,
            max_batch=queue.settings.max_batch,
            now=now,
        )
        if result.outcome is Outcome.NOTHING_NEW and not result.skipped:
            return Reconciled(namespace, Outcome.NOTHING_PENDING, result)
        return Reconciled(namespace, result.outcome, result)
    claim = queue.claim_namespace(namespace)
    if claim is None and pipeline.edits is not None:
        # Nothing queued, but an agent may have edited a file: its edit makes the batch.
        edits = pipeline.agent_edits(namespace)
        if edits:
            queue.enqueue_many(edits)
            claim = queue.claim_namespace(namespace)
    if claim is None:
        # A worker may have claimed it since we looked: say so rather than "nothing pending".
        if queue.admin.namespace_state(namespace).leased:
            return Reconciled(namespace, Outcome.LEASED, note=LEASED_NOTE)
        return Reconciled(namespace, Outcome.NOTHING_PENDING)
    result = pipeline.consolidate(claim, trigger="reconcile")
    return Reconciled(namespace, result.outcome, result)


def _no_namespace_progress(_namespace: str) -> None:
    return None


def reconcile_each(
    pipeline: Pipeline,
    namespaces: Sequence[str],
    *,
    dry_run: bool = False,
    extra: Callable[[str], Sequence[Candidate]] = lambda _namespace: (),
    now: datetime,
    progress: Callable[[str], None] = _no_namespace_progress,
) -> list[Reconciled]:
    """:func:`reconcile_namespace` for each of ``namespaces`` (``reconcile --all``), each behind
    its own bulkhead: a namespace whose step raises (a corrupt log entry a preview cannot read,
    a Redis error on its key) is reported ``failed`` with the reason it was set aside, and the
    others are reconciled all the same; an outage (:data:`OUTAGES`) is raised at once.
    ``progress`` is called after each namespace."""
    bulkhead = Bulkhead("reconcile")
    done = []
    for namespace in namespaces:
        result = bulkhead.run(
            namespace,
            lambda n=namespace: reconcile_namespace(  # type: ignore[misc]
                pipeline, n, dry_run=dry_run, extra=extra(n), now=now
            ),
            stops=OUTAGES,
        )
        if result is None:
            note = f"set aside: {bulkhead.set_aside[-1].reason}"
            result = Reconciled(namespace, Outcome.FAILED, note=note)
        done.append(result)
        progress(namespace)
    return done


@dataclass(frozen=True)
class ReconcileRun:
    """Each namespace's outcome, each committed file's own version (by namespace, then path),
    and what publishing the commits delivered (None when nothing was committed)."""

    done: list[Reconciled]
    versions: dict[str, dict[str, int]]
    delivery: DeliveryReport | None


def reconcile_targets(
    pipeline: Pipeline,
    sinks: Mapping[str, Sink],
    target: Namespace | None,
    *,
    scan: SourceScan | None = None,
    dry_run: bool = False,
    now: datetime,
    progress: Progress = no_progress,
) -> ReconcileRun:
    """Reconcile ``target`` (every namespace the queue or ``scan`` knows when None), publish
    the commits, and read back the versions. ``scan`` is a re-scan made just before: its
    namespaces count as known, and a dry run previews its candidates with the queued ones."""
    queue, store = pipeline.queue, pipeline.store
    if target is None:
        keys = sorted(set(queue.admin.namespaces()) | set(scan.by_namespace if scan else ()))
    else:
        if not (scan and scan.by_namespace.get(target.key)):
            require_known(store, queue, target)
        keys = [target.key]
    with progress(len(keys)) as advance:
        done = reconcile_each(
            pipeline,
            keys,
            dry_run=dry_run,
            extra=lambda key: scan.by_namespace.get(key, []) if scan and dry_run else [],
            now=now,
            progress=advance,
        )
    committed = [r.namespace for r in done if r.outcome is Outcome.COMMITTED]
    delivery = publish_now(store, sinks, namespaces=committed) if committed else None
    versions = {r.namespace: file_versions(store, r) for r in done}
    return ReconcileRun(done, versions, delivery)


def require_known(store: MemoryStore, queue: RedisQueue, ns: Namespace) -> None:
    """:class:`NotFound` unless the store has memory for ``ns`` or the queue knows it."""
    if ns.key in store.namespaces(scope=ns.scope.value, user_id=ns.user_id):
        return
    if queue.admin.namespace_state(ns.key).known:
        return
    raise NotFound(
        f"{ns.key} is unknown: it has no memory and nothing queued; check the id "
        "(`memworker status` shows the queue)"
    )


def file_versions(store: MemoryStore, r: Reconciled) -> dict[str, int]:
    """Each changed file's own version in the namespace revision this run committed (none for
    a dry run): what ``memworker history`` lists for that file."""
    res = r.result
    if r.outcome is not Outcome.COMMITTED or res is None or res.version is None:
        return {}
    versions = {}
    for change in res.files:
        for v in store.file_history(r.namespace, change.path):
            if v.namespace_version == res.version:
                versions[change.path] = v.version
    return versions
