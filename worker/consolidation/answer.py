"""The model's answer: a plan over the short ids its prompt showed, and its translation back.

The prompt names entries ``E1, E2, …`` and candidates ``C1, C2, …`` (fewer tokens, and no real
id to copy wrong); :func:`translate` maps the answer back and lists what it cannot map as
problems for the repair call.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from worker.consolidation.prompt import ShortIds
from worker.consolidation.types import Add, Confirm, Invalidate, Operation, Reject, Supersede
from worker.constants import FACTS_PATH


class PlanOp(BaseModel):
    """One operation of the plan, over the short ids shown in the prompt."""

    op: Literal["add", "confirm", "supersede", "invalidate", "reject"]
    candidates: list[str] = Field(
        default_factory=list, description="Candidate ids (C1, C2, …) this operation accounts for"
    )
    entry: str | None = Field(
        default=None, description="Existing entry id (E1, …) for confirm/supersede/invalidate"
    )
    text: str | None = Field(default=None, description="Entry text for add/supersede")
    path: str | None = Field(default=None, description="File path for add (optional for supersede)")
    key: str | None = Field(default=None, description="Optional slot key, e.g. preference.language")
    reason: str | None = Field(default=None, description="Why, for supersede/invalidate/reject")


class ConsolidationPlan(BaseModel):
    """The operations that merge the candidates into the memories; every candidate is used."""

    ops: list[PlanOp]


def translate(answer: ConsolidationPlan, ids: ShortIds) -> tuple[list[Operation], list[str]]:
    """The answer over real ids, and the problems (unknown short ids, missing fields).

    >>> ids = ShortIds(entries={"E1": "e-real"}, candidates={"C1": "c-real"})
    >>> ops, problems = translate(ConsolidationPlan(ops=[PlanOp(op="confirm", candidates=["C1"],
    ...     entry="E1")]), ids)
    >>> (ops[0].entry_id, ops[0].candidate_ids, problems)
    ('e-real', ['c-real'], [])
    >>> translate(ConsolidationPlan(ops=[PlanOp(op="reject", candidates=["C9"])]), ids)[1]
    ['operation 1 (reject): unknown candidate id C9; use only the C ids shown']
    """
    ops: list[Operation] = []
    problems: list[str] = []
    for index, raw in enumerate(answer.ops, 1):
        label = f"operation {index} ({raw.op})"
        cids = []
        for short in raw.candidates:
            if short in ids.candidates:
                cids.append(ids.candidates[short])
            else:
                problems.append(f"{label}: unknown candidate id {short}; use only the C ids shown")
        entry_id: str | None = None
        if raw.op in ("confirm", "supersede", "invalidate"):
            entry_id = ids.entries.get(raw.entry or "")
            if entry_id is None:
                problems.append(f"{label}: unknown entry id {raw.entry}; use only the E ids shown")
                continue
        if raw.op in ("add", "supersede") and not (raw.text or "").strip():
            problems.append(f"{label}: text is missing")
            continue
        text = (raw.text or "").strip()
        if raw.op == "add":
            ops.append(Add(candidate_ids=cids, path=raw.path or FACTS_PATH, text=text, key=raw.key))
        elif raw.op == "confirm":
            assert entry_id is not None
            ops.append(Confirm(candidate_ids=cids, entry_id=entry_id))
        elif raw.op == "supersede":
            assert entry_id is not None
            ops.append(
                Supersede(
                    candidate_ids=cids, entry_id=entry_id, text=text, key=raw.key,
                    path=raw.path, reason=raw.reason or "superseded",
                )
            )  # fmt: skip
        elif raw.op == "invalidate":
            assert entry_id is not None
            reason = raw.reason or "invalidated by the consolidation agent"
            ops.append(Invalidate(candidate_ids=cids, entry_id=entry_id, reason=reason))
        else:
            reason = raw.reason or "rejected by the consolidation agent"
            ops.append(Reject(candidate_ids=cids, reason=reason))
    return ops, problems


def schema_hint() -> str:
    """The answer format for ``json_mode``, where the server checks only that it is JSON."""
    schema = json.dumps(ConsolidationPlan.model_json_schema(), separators=(",", ":"))
    return "Answer with one JSON object, nothing else, that matches this JSON schema:\n" + schema
