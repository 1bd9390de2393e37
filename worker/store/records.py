"""The values the memory store takes and returns (plain frozen dataclasses).

>>> from datetime import UTC, datetime
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> RunRecord(trigger="cli", namespace="user:u1", started_at=t, outcome="ok").candidates
0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from worker.models import Entry

RunTrigger = Literal["queue", "reconcile", "schedule", "cli", "import"]
TickStatus = Literal["running", "ok", "failed"]
ApprovalStatus = Literal["pending", "approved", "rejected"]

RUN_TRIGGERS: Final = frozenset({"queue", "reconcile", "schedule", "cli", "import"})

#: Author of versions written by the consolidator; operators write ``operator:<name>``.
CONSOLIDATOR_AUTHOR: Final = "consolidator"
#: Default author of a rollback's new version.
ROLLBACK_AUTHOR: Final = "rollback"


@dataclass(frozen=True)
class RunRecord:
    """One consolidation run as the caller saw it; ``trigger``/``outcome`` take the values of
    :data:`RunTrigger`/:data:`~worker.types.RunOutcome` (checked when written)."""

    trigger: str
    namespace: str | None
    started_at: datetime
    outcome: str
    finished_at: datetime | None = None
    schedule: str | None = None
    tick: datetime | None = None
    window: tuple[datetime, datetime] | None = None
    error: str | None = None
    candidates: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class RunInfo(RunRecord):
    """A stored run, with its id."""

    id: int = 0


@dataclass(frozen=True)
class CommitResult:
    """What one committed transaction wrote."""

    version: int  #: the namespace's new version (the next ``expected_version``)
    run_id: int | None
    files: tuple[tuple[str, int], ...]  #: (path, new file version)
    outbox_ids: tuple[int, ...]


@dataclass(frozen=True)
class FileVersionInfo:
    """One stored version of a memory file."""

    path: str
    version: int
    content: str
    diff: str
    author: str
    run_id: int | None
    namespace_version: int
    created_at: datetime


@dataclass(frozen=True)
class FileInfo:
    """A memory file as it is now."""

    path: str
    current_version: int
    size: int  #: bytes of the current content (UTF-8)
    operator_owned: bool
    created_at: datetime
    modified_at: datetime


@dataclass(frozen=True)
class OutboxItem:
    """One delivery for one sink: a committed version to publish, or a path to delete.

    For an erase tombstone (``deleted``), ``content`` is empty, ``version`` is 0 and both
    timestamps are the erase time.
    """

    id: int
    sink: str
    namespace: str
    path: str
    deleted: bool
    content: str
    version: int
    created_at: datetime  #: when the file was first created (deepagents ``FileData``)
    modified_at: datetime  #: when this version was committed
    attempts: int
    last_error: str | None
    #: The namespace's erase generation when the row was claimed: the delivery is for that
    #: generation, and is taken back if the namespace's generation moved on by its outcome.
    generation: int = 0


@dataclass(frozen=True)
class SinkLag:
    """Undelivered items of one sink and the age of the oldest, in seconds."""

    pending: int
    oldest_age_seconds: float


@dataclass(frozen=True)
class SinkHealth:
    """A sink's circuit breaker (see :mod:`worker.store.outbox`).

    >>> from datetime import UTC, datetime, timedelta
    >>> t = datetime(2025, 1, 1, tzinfo=UTC)
    >>> SinkHealth("files").state(t), SinkHealth("x", 3, t + timedelta(seconds=1)).state(t)
    ('closed', 'open')
    """

    sink: str
    consecutive_failures: int = 0
    open_until: datetime | None = None
    last_error: str | None = None
    last_failure_at: datetime | None = None
    last_success_at: datetime | None = None

    def state(self, now: datetime) -> Literal["closed", "open", "probing"]:
        """``open``: left alone until ``open_until``; ``probing``: one delivery may try."""
        if self.open_until is None:
            return "closed"
        return "open" if now < self.open_until else "probing"


@dataclass(frozen=True)
class TickInfo:
    """One scheduled tick's run."""

    schedule: str
    tick: datetime
    status: str
    attempts: int
    started_at: datetime
    finished_at: datetime | None
    window: tuple[datetime, datetime] | None
    error: str | None


@dataclass(frozen=True)
class ApprovalInfo:
    """A change to a read-only or sensitive path, waiting for (or decided by) an operator."""

    id: int
    namespace: str
    path: str
    operation: dict[str, object]
    candidate_ids: tuple[str, ...]
    status: str
    created_at: datetime
    decided_at: datetime | None
    decided_by: str | None


@dataclass(frozen=True)
class EraseReport:
    """Rows removed per table by an erase, and the tombstones queued for the sinks."""

    namespaces: tuple[str, ...]
    deleted: dict[str, int]
    tombstones: int


@dataclass(frozen=True)
class LedgerInfo:
    """One ledger row: what became of one candidate in one namespace.

    ``source``, ``thread_id``, ``said_at``, ``operation`` and ``revision`` are None on rows
    written before they were recorded, and on rows imported from older exports.
    """

    namespace: str
    candidate_id: str
    trace_id: str
    outcome: str  #: merged, duplicate, forgotten, rejected, pending_approval
    reason: str | None
    entry_id: str | None  #: the entry it made, confirmed or retired
    run_id: int | None
    recorded_at: datetime  #: when the commit that consumed it ran
    source: str | None  #: hot_path, langgraph_thread, inbox, …
    thread_id: str | None
    said_at: datetime | None  #: the candidate's own time
    operation: str | None  #: the plan operation: add, supersede, confirm, invalidate, reject
    revision: int | None  #: the namespace revision its batch committed


@dataclass(frozen=True)
class EntryProvenance:
    """An entry with where it came from: the revision that added it (and the file version
    that commit wrote), the one that retired it, and its candidates' ledger rows."""

    namespace: str
    entry: Entry
    added_revision: int
    invalidated_revision: int | None
    file_version: int | None
    ledger: tuple[LedgerInfo, ...]
