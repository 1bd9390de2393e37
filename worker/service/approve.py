"""Apply a change an operator approved (to a read-only or sensitive file) as a new version.

The waiting operation is re-validated against the namespace as it is *now*, and committed in
the same transaction that records the approval (fenced like a merge). If it no longer applies
(say the entry it replaces is gone), nothing is written and the approval stays pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from pydantic import ValidationError

from worker.consolidation.apply import apply_plan
from worker.consolidation.types import Plan
from worker.consolidation.validate import validate_plan
from worker.errors import InvalidPlan
from worker.models import Candidate
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.store.records import ApprovalInfo, CommitResult
from worker.values import AppliedPlan, NamespaceState


def approve(
    store: MemoryStore,
    settings: Settings,
    approval_id: int,
    *,
    by: str,
    sinks: Sequence[str],
    now: datetime,
) -> tuple[ApprovalInfo, CommitResult]:
    """Approve ``approval_id`` and commit its operation; :class:`InvalidPlan` (nothing written,
    still pending) when it no longer applies, :class:`NotFound` when it is not pending."""

    def build(info: ApprovalInfo, state: NamespaceState, files: dict[str, str]) -> AppliedPlan:
        return applied_approval(info, state, files, settings=settings, now=now)

    return store.apply_approval(approval_id, by=by, build=build, sinks=sinks, now=now)


def applied_approval(
    info: ApprovalInfo,
    state: NamespaceState,
    files: dict[str, str],
    *,
    settings: Settings,
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
