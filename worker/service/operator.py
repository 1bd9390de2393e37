"""What operators do to memory files: write, roll back, approve or reject, compact, and ask why.

* :func:`put_file` writes an operator-owned file (org policies, agent notes), on the
  database's clock: the consolidator never edits it (changes it proposes wait for an
  approval), and the hot path cannot write org scope at all. :func:`rollback` brings an old
  version back as a new one (history is append-only).
* :func:`approve` re-validates a waiting operation against the namespace as it is *now*,
  commits it in the transaction that records the approval (fenced like a merge), then
  publishes it; if it no longer applies, nothing is written and the approval stays pending.
  :func:`reject` writes nothing to the file. Both run on the database's clock.
* :func:`compact_files` re-renders every file within its byte budget (e.g. after the budget was
  lowered): a file over it keeps the entries most worth loading and ends with one line
  counting the rest (:func:`~worker.consolidation.render.select`), which stay active. Each
  namespace goes through the same database fence as a merge, so a compaction racing a merge
  loses cleanly (counted ``stale``), and is its own bulkhead.
* :func:`explain` (``memworker why``) and :func:`candidate_fate` (``memworker candidate``) only
  read: the first shows the candidates that made, confirmed or retired each matching entry (the
  candidate ledger); the second follows one candidate through the ledger, the queue's log and
  the erase fence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Literal

from pydantic import ValidationError

from worker.connectors.base import Sink
from worker.consolidation.plan import Plan, apply_plan, compact, validate_plan
from worker.errors import InvalidOption, InvalidPlan, NotFound, StaleVersion
from worker.models import AppliedPlan, Candidate, NamespaceState
from worker.service.bulkhead import Bulkhead, SetAside
from worker.service.publish import DeliveryReport, publish_now
from worker.store.commit import unified_diff
from worker.store.memory import MemoryStore, RunRecord
from worker.store.records import ROLLBACK_AUTHOR, ApprovalInfo, CommitResult
from worker.types import ConsolidationSettings

if TYPE_CHECKING:
    from worker.models import Candidate
    from worker.queue.redis_queue import RedisQueue
    from worker.service.search import SqlMemorySearch
    from worker.store.memory import MemoryStore
    from worker.store.records import EntryProvenance, LedgerInfo


@dataclass(frozen=True)
class Put:
    """The file written (its version) and what its publication delivered."""

    namespace: str
    path: str
    version: int
    delivery: DeliveryReport


def put_file(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    *,
    namespace: str,
    path: str,
    content: str,
    author: str,
) -> Put:
    """Commit ``content`` as the next version of ``namespace`` ``path``, then publish it."""
    result = store.put_file(
        namespace=namespace,
        path=path,
        content=content,
        author=author,
        sinks=tuple(sinks),
        now=store.db_now(),
    )
    delivery = publish_now(store, sinks, namespaces=[namespace])
    ((_, version),) = result.files
    return Put(namespace, path, version, delivery)


@dataclass(frozen=True)
class RollbackPreview:
    current_version: int
    diff: str  #: from the current content to the version brought back ("" when equal)


@dataclass(frozen=True)
class RolledBack:
    version: int  #: the new version, equal in content to the one brought back
    delivery: DeliveryReport


def preview_rollback(store: MemoryStore, namespace: str, path: str, to: int) -> RollbackPreview:
    """What rolling ``path`` back to version ``to`` would change; NotFound for a bad version."""
    target = store.file_version(namespace, path, to)
    current = store.file_history(namespace, path)[-1]
    return RollbackPreview(current.version, unified_diff(path, current.content, target.content))


def rollback(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    namespace: str,
    path: str,
    *,
    to: int,
    now: datetime,
    author: str = ROLLBACK_AUTHOR,
) -> RolledBack:
    """Add a version of ``path`` equal to version ``to``, then publish it."""
    result = store.rollback_file(
        namespace=namespace, path=path, to_version=to, author=author, sinks=tuple(sinks), now=now
    )
    ((_, version),) = result.files
    return RolledBack(version, publish_now(store, sinks, now=now, namespaces=[namespace]))


@dataclass(frozen=True)
class Approved:
    """The approval, the version its operation committed, and what its publication delivered."""

    info: ApprovalInfo
    result: CommitResult
    delivery: DeliveryReport


def approve(
    store: MemoryStore,
    settings: ConsolidationSettings,
    sinks: Mapping[str, Sink],
    approval_id: int,
    *,
    by: str,
) -> Approved:
    """Approve ``approval_id``, commit its operation and publish it; :class:`InvalidPlan`
    (nothing written, still pending) when it no longer applies, :class:`NotFound` when it is
    not pending."""
    now = store.db_now()

    def build(info: ApprovalInfo, state: NamespaceState, files: dict[str, str]) -> AppliedPlan:
        return applied_approval(info, state, files, settings=settings, now=now)

    info, result = store.apply_approval(
        approval_id, by=by, build=build, sinks=tuple(sinks), now=now
    )
    return Approved(info, result, publish_now(store, sinks, namespaces=[info.namespace]))


def reject(store: MemoryStore, approval_id: int, *, by: str) -> ApprovalInfo:
    """Reject a waiting operation: nothing is written to its file; :class:`NotFound` when it
    is not pending."""
    return store.reject_approval(approval_id, by=by, now=store.db_now())


def applied_approval(
    info: ApprovalInfo,
    state: NamespaceState,
    files: dict[str, str],
    *,
    settings: ConsolidationSettings,
    now: datetime,
) -> AppliedPlan:
    """The stored operation as a one-op plan, re-validated against ``state`` and applied.

    The operator's approval is what lifts the read-only/sensitive guard, so the path
    protections are off here; every other guard rail (text, budget, references) still holds.
    The batch is empty: the candidates' ledger rows already exist (the store updates them).
    """
    try:
        plan = Plan.model_validate({"ops": [info.operation]})
    except ValidationError as exc:
        raise InvalidPlan([f"approval {info.id} holds an unreadable operation: {exc}"]) from None
    writable = replace(state, read_only_paths=frozenset())
    problems = validate_plan(
        writable,
        _stand_ins(info, state.namespace, now),
        plan,
        max_removals=settings.max_removals_per_run,
        max_text_bytes=settings.max_text_bytes,
        reserved=(settings.inbox_route,),
        justify=False,  # checked with the real candidates when the change was proposed
    )
    if problems:
        raise InvalidPlan(
            [*problems, f"approval {info.id} stays pending; reject it if it no longer applies"]
        )
    return apply_plan(
        writable,
        (),
        plan,
        now=now,
        current_files=files,
        file_budget_bytes=settings.file_budget_bytes,
        sensitive_paths=(),
    )


def _stand_ins(info: ApprovalInfo, namespace: str, now: datetime) -> list[Candidate]:
    """Validation wants the candidates the operation names; stand-ins carry their ids (the
    originals left the queue when the batch that proposed this change was committed)."""
    return [
        Candidate.model_construct(
            id=cid,
            namespace=namespace,
            user_id=None,
            trace_id=f"approval-{info.id}",
            text="",
            created_at=now,
        )
        for cid in info.candidate_ids
    ]


@dataclass(frozen=True)
class CompactionReport:
    namespaces: int  #: namespaces that got a new version
    evicted: int  #: active entries the new file versions leave out, over all of them
    stale: int  #: namespaces a concurrent merge changed first (left for the next compaction)
    set_aside: tuple[SetAside, ...] = field(default=())  #: namespaces that failed, and why

    def as_dict(self) -> dict[str, int]:
        return {
            "namespaces": self.namespaces,
            "evicted": self.evicted,
            "stale": self.stale,
            "set_aside": len(self.set_aside),
        }


@dataclass(frozen=True)
class RunContext:
    """Where a compaction's run rows say it came from (a schedule's fire, or none)."""

    schedule: str | None = None
    window: tuple[datetime, datetime] | None = None


def compact_files(
    store: MemoryStore,
    settings: ConsolidationSettings,
    *,
    sinks: Sequence[str],
    scope: str | None,
    now: datetime,
    context: RunContext = RunContext(),  # frozen: sharing the default is safe
) -> CompactionReport:
    """Compact every namespace of ``scope`` (all when None) whose files exceed their budget."""
    bulkhead = Bulkhead("compaction")
    totals = [0, 0, 0]  # compacted, evicted, stale
    for namespace in store.namespaces(scope=scope):
        done = bulkhead.run(
            namespace,
            lambda n=namespace: _compact_one(  # type: ignore[misc]
                store, settings, n, sinks=sinks, now=now, context=context
            ),
        )
        for i, n in enumerate(done or (0, 0, 0)):
            totals[i] += n
    compacted, evicted, stale = totals
    return CompactionReport(compacted, evicted, stale, tuple(bulkhead.set_aside))


def _compact_one(
    store: MemoryStore,
    settings: ConsolidationSettings,
    namespace: str,
    *,
    sinks: Sequence[str],
    now: datetime,
    context: RunContext,
) -> tuple[int, int, int]:
    """Compact one namespace: (compacted, evicted, stale), each 0 or its count."""
    snapshot = store.snapshot(namespace, ())
    state = snapshot.state
    applied = compact(
        state,
        now=now,
        current_files=snapshot.current_files,
        file_budget_bytes=settings.file_budget_bytes,
        sensitive_paths=settings.sensitive_paths,
    )
    if not applied.files:
        return 0, 0, 0
    try:
        store.commit_batch(
            namespace=namespace,
            expected_version=state.version,
            applied_position=state.applied_position,
            applied=applied,
            run=_run(namespace, applied, now, context),
            sinks=sinks,
            now=now,
        )
    except StaleVersion:
        return 0, 0, 1  # a merge committed meanwhile; the next compaction looks again
    return 1, applied.counts.get("evicted", 0), 0


def _run(namespace: str, applied: AppliedPlan, now: datetime, context: RunContext) -> RunRecord:
    return RunRecord(
        trigger="schedule" if context.schedule else "cli",
        namespace=namespace,
        schedule=context.schedule,
        tick=context.window[1] if context.window else None,
        window=context.window,
        started_at=now,
        finished_at=now,
        outcome="ok",
        error=None,
        candidates=0,
        counts=dict(applied.counts),
    )


#: Entries ``why`` explains by default: the matches an operator reads at once.
DEFAULT_WHY_LIMIT: Final = 5
#: The most entries one ``why`` explains (each brings its candidates' ledger rows).
MAX_WHY_LIMIT: Final = 100

#: Where a candidate is, in the words ``memworker candidate`` prints and its JSON carries.
CandidateState = Literal[
    "merged",  # made or changed an entry (add, supersede)
    "duplicate",  # confirmed an entry that already said it
    "forgotten",  # retired an entry on request
    "rejected",  # set aside by the consolidator or an operator; the reason says why
    "pending_approval",  # waits for an operator (`memworker approvals list`)
    "queued",  # in the queue, waiting for its namespace's debounce
    "due",  # in the queue, due: the next sweep hands it to a worker
    "leased",  # a worker is merging its namespace's batch now
    "dead_lettered",  # its namespace's batch failed too often (`memworker dlq list`)
    "erased",  # its namespace was erased (`memworker forget`): nothing of it is kept
]


def explain(
    store: MemoryStore, search: SqlMemorySearch, namespace: str, text: str, *, limit: int
) -> list[EntryProvenance]:
    """The entries of ``namespace`` matching ``text``, each with its provenance.

    Entries whose text contains ``text`` (any case; retired ones too, active first), so a
    line copied from a memory file finds its entry; when none does, the deployment's search
    (full text, hybrid with embeddings) over the active entries."""
    if not text.strip():
        raise InvalidOption("give the text to explain, e.g. a line of a memory file")
    if not 1 <= limit <= MAX_WHY_LIMIT:
        raise InvalidOption(f"--limit must be between 1 and {MAX_WHY_LIMIT}, not {limit}")
    ids = store.entries_containing(namespace, text.strip(), limit=limit)
    if not ids:
        ids = [e.id for e in search.search_entries(namespace, text, limit)]
    return store.provenance(namespace, ids)


@dataclass(frozen=True)
class QueuedCandidate:
    """A candidate still in its namespace's log, and the namespace's queue state."""

    namespace: str
    stream_id: str
    candidate: Candidate
    due_at: datetime | None  #: when the namespace is due (None: leased or dead-lettered)
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class CandidateFate:
    """What became of one candidate: its ``state``, one sentence saying so, and what it was
    read from (ledger rows, the queued candidate, or neither for an erased one)."""

    candidate_id: str
    state: CandidateState
    detail: str
    ledger: tuple[LedgerInfo, ...] = ()
    queued: QueuedCandidate | None = None
    entries: tuple[EntryProvenance, ...] = field(default=())


def candidate_fate(
    store: MemoryStore, queue: RedisQueue, candidate_id: str, *, namespace: str | None = None
) -> CandidateFate:
    """Follow ``candidate_id``: the ledger first (it was consumed), then the queue (the log of
    ``namespace``, or of every namespace the queue knows), then the erase fence of
    ``namespace``. :class:`NotFound` when none of them knows it."""
    if not candidate_id.strip():
        raise InvalidOption("give a candidate id (`memworker enqueue` prints one)")
    rows = [
        r
        for r in store.candidate_ledger(candidate_id)
        if namespace is None or r.namespace == namespace
    ]
    if rows:
        return _consumed(store, candidate_id, rows)
    where = [namespace] if namespace is not None else queue.admin.namespaces()
    found = queue.admin.find_queued(candidate_id, where)
    if found is not None:
        return _in_queue(queue, candidate_id, *found)
    if namespace is not None and store.was_erased(namespace):
        return CandidateFate(
            candidate_id,
            "erased",
            f"{namespace} was erased (memworker forget): nothing of the candidate is kept",
        )
    scope = namespace or "any namespace"
    raise NotFound(
        f"candidate {candidate_id} is not in the ledger or the queue of {scope}: never "
        "enqueued, or its namespace was erased (name it with --user/--namespace to check)"
    )


def _consumed(store: MemoryStore, candidate_id: str, rows: list[LedgerInfo]) -> CandidateFate:
    """The fate a ledger row records (the latest, when several namespaces consumed it)."""
    row = rows[-1]
    entries = tuple(store.provenance(row.namespace, [row.entry_id])) if row.entry_id else ()
    at = f" at revision {row.revision}" if row.revision is not None else ""
    op = f" ({row.operation})" if row.operation else ""
    because = f": {row.reason}" if row.reason else ""
    details = {
        "merged": f"merged into entry {row.entry_id} of {row.namespace}{at}{op}{because}",
        "duplicate": f"confirmed entry {row.entry_id} of {row.namespace}{at}{op}",
        "forgotten": f"retired entry {row.entry_id} of {row.namespace}{at}{op}{because}",
        "rejected": f"rejected in {row.namespace}{at}{op}{because}",
        "pending_approval": (
            f"waits for approval in {row.namespace}{because} (memworker approvals list)"
        ),
    }
    state: CandidateState = row.outcome  # type: ignore[assignment]  # the ledger's vocabulary
    return CandidateFate(candidate_id, state, details[row.outcome], tuple(rows), None, entries)


def _in_queue(
    queue: RedisQueue, candidate_id: str, namespace: str, stream_id: str, candidate: Candidate
) -> CandidateFate:
    """The fate of a candidate still in its namespace's log."""
    ns = queue.admin.namespace_state(namespace)
    due_ms = queue.admin.due_at_ms(namespace)
    due_at = None if due_ms is None else datetime.fromtimestamp(due_ms / 1000, UTC)
    queued = QueuedCandidate(namespace, stream_id, candidate, due_at, ns.attempts, ns.last_error)
    state: CandidateState
    if ns.dead:
        state = "dead_lettered"
        detail = (
            f"dead-lettered with {namespace} after {ns.attempts} attempts: {ns.last_error} "
            "(memworker dlq retry)"
        )
    elif ns.leased:
        state, detail = "leased", f"a worker is merging {namespace}'s batch now"
    elif due_ms is not None and due_ms <= queue.server_ms():
        state, detail = "due", f"due: the next sweep hands {namespace} to a worker"
    else:
        when = due_at.isoformat(timespec="seconds") if due_at else "its next candidate's debounce"
        state, detail = "queued", f"queued in {namespace}, due at {when}"
    return CandidateFate(candidate_id, state, detail, (), queued)
