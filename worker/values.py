"""Value types shared by the store and the consolidators: a namespace's memory and its changes.

The store reads and writes these; the consolidators read a :class:`NamespaceState` and their
plans are applied into an :class:`AppliedPlan`. This module imports nothing of memworker, so
both layers can depend on it without depending on each other.

>>> from datetime import UTC, datetime
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> e = Entry(id="e1", path="/memories/facts.md", text="Likes tea", valid_from=t,
...           created_at=t, last_confirmed_at=t)
>>> NamespaceState("user:u1", 3, None, entries=(e,)).paths()
['/memories/facts.md']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict


class Entry(BaseModel):
    """One remembered statement inside a memory file. Superseded entries keep their row."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: str
    text: str
    key: str | None = None
    valid_from: datetime
    invalid_at: datetime | None = None
    invalid_reason: str | None = None
    superseded_by: str | None = None
    confirmations: int = 1
    candidate_ids: tuple[str, ...] = ()
    trace_ids: tuple[str, ...] = ()
    created_at: datetime
    last_confirmed_at: datetime

    @property
    def active(self) -> bool:
        return self.invalid_at is None


@dataclass(frozen=True)
class NamespaceState:
    """What a consolidator sees of one namespace: its active entries, grouped by file path."""

    namespace: str
    version: int
    applied_position: str | None
    entries: tuple[Entry, ...] = ()
    read_only_paths: frozenset[str] = field(default_factory=frozenset)

    def paths(self) -> list[str]:
        return sorted({e.path for e in self.entries})


LedgerOutcome = Literal["merged", "duplicate", "forgotten", "rejected", "pending_approval"]


@dataclass(frozen=True)
class LedgerRow:
    """What became of one candidate."""

    candidate_id: str
    trace_id: str
    outcome: LedgerOutcome
    reason: str | None = None
    entry_id: str | None = None
    #: Where and when the candidate was said (its ``source``, ``thread_id``, ``created_at``).
    source: str | None = None
    thread_id: str | None = None
    said_at: datetime | None = None
    #: The plan operation that consumed it (``add``, ``supersede``, ``confirm``, …).
    operation: str | None = None


@dataclass(frozen=True)
class FileChange:
    """A memory file's new rendered content and the unified diff from its previous version."""

    path: str
    content: str
    diff: str
    previous_content: str | None


@dataclass(frozen=True)
class PendingApproval:
    """An operation on a read-only or sensitive path, waiting for an operator."""

    path: str
    operation: dict[str, object]
    candidate_ids: tuple[str, ...]


@dataclass(frozen=True)
class AppliedPlan:
    """A validated plan applied to a state: everything the commit writes, computed up front."""

    new_entries: tuple[Entry, ...]  #: entries to insert
    changed_entries: tuple[Entry, ...]  #: existing entries updated (invalidated or confirmed)
    files: tuple[FileChange, ...]  #: files whose rendered content changed
    ledger: tuple[LedgerRow, ...]  #: one row per candidate of the batch
    approvals: tuple[PendingApproval, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)  #: added/superseded/duplicates/…


@dataclass(frozen=True)
class MemoryHit:
    """One committed entry that matched a search (the search tools' and the SQL search's shared
    result)."""

    path: str
    text: str
