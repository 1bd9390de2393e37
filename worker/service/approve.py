"""Decide a change waiting for an operator (to a read-only or sensitive file).

Approving re-validates the waiting operation against the namespace as it is *now*, commits it
in the same transaction that records the approval (fenced like a merge), then publishes it. If
it no longer applies (say the entry it replaces is gone), nothing is written and the approval
stays pending. Rejecting writes nothing to the file. Both run on the database's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from pydantic import ValidationError

from worker.consolidation.apply import apply_plan
from worker.consolidation.types import Plan
from worker.consolidation.validate import validate_plan
from worker.errors import InvalidPlan
from worker.models import Candidate
from worker.service.publish import DeliveryReport, publish_now
from worker.sinks.base import Sink
from worker.slices import ConsolidationSettings
from worker.store.memory import MemoryStore
from worker.store.records import ApprovalInfo, CommitResult
from worker.values import AppliedPlan, NamespaceState


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
