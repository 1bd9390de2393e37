"""The data a consolidator reads and writes: entries, the namespace state, and plans.

A plan is a list of operations over entry ids and candidate ids. Every candidate of a batch is
accounted for by exactly one operation (or named in one as confirming/replacing evidence).

>>> from worker.consolidation.types import Add, Plan
>>> Plan(ops=[Add(candidate_ids=["c1"], path="/memories/facts.md", text="Likes tea")]).ops[0].op
'add'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


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

    def by_id(self) -> dict[str, Entry]:
        return {e.id: e for e in self.entries}

    def paths(self) -> list[str]:
        return sorted({e.path for e in self.entries})


class _Op(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Candidates this operation accounts for (evidence); at least one for candidate-driven ops.
    candidate_ids: list[str] = Field(default_factory=list)


class Add(_Op):
    """A new entry in ``path``."""

    op: Literal["add"] = "add"
    path: str
    text: str
    key: str | None = None


class Confirm(_Op):
    """The candidates restate ``entry_id``: count a confirmation, add nothing (a duplicate)."""

    op: Literal["confirm"] = "confirm"
    entry_id: str


class Supersede(_Op):
    """``entry_id`` is replaced by a new entry with ``text`` (kept in history, invalidated)."""

    op: Literal["supersede"] = "supersede"
    entry_id: str
    text: str
    key: str | None = None
    path: str | None = None  #: defaults to the replaced entry's path
    reason: str = "superseded"


class Invalidate(_Op):
    """``entry_id`` stops being valid (forget, contradiction, eviction); kept in history."""

    op: Literal["invalidate"] = "invalidate"
    entry_id: str
    reason: str


class Reject(_Op):
    """The candidates are not stored (secret, empty extraction, guard rail) and why."""

    op: Literal["reject"] = "reject"
    reason: str


Operation = Annotated[Add | Confirm | Supersede | Invalidate | Reject, Field(discriminator="op")]


class Plan(BaseModel):
    """The consolidator's answer for one batch."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ops: list[Operation] = Field(default_factory=list)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


LedgerOutcome = Literal["merged", "duplicate", "forgotten", "rejected", "pending_approval"]


@dataclass(frozen=True)
class LedgerRow:
    """What became of one candidate."""

    candidate_id: str
    trace_id: str
    outcome: LedgerOutcome
    reason: str | None = None
    entry_id: str | None = None


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
