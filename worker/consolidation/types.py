"""Plans: what a consolidator proposes for one batch, as operations over entry and candidate ids.

Every candidate of a batch is accounted for by exactly one operation (or named in one as
confirming/replacing evidence). The entries and states the operations refer to are the shared
value types of :mod:`worker.values`.

>>> from worker.consolidation.types import Add, Plan
>>> Plan(ops=[Add(candidate_ids=["c1"], path="/memories/facts.md", text="Likes tea")]).ops[0].op
'add'
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


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
