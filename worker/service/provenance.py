"""Why the assistant remembers what it does: the use cases behind ``memworker why`` and
``memworker candidate``.

``why`` finds a namespace's entries by their text and shows, for each, the candidates that
made, confirmed or retired it, read from the candidate ledger. ``candidate`` follows one
candidate: merged, confirmed or rejected (the ledger, in SQL), still queued, due, leased or
dead-lettered (the queue's log, in Redis), or erased (the namespace's erase fence). Both only
read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Literal

from worker.errors import InvalidOption, NotFound

if TYPE_CHECKING:
    from worker.models import Candidate
    from worker.queue.redis_queue import RedisQueue
    from worker.service.memory_search import SqlMemorySearch
    from worker.store.memory import MemoryStore
    from worker.store.records import EntryProvenance, LedgerInfo

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
