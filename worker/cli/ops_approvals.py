"""``memworker approvals``: changes to read-only or sensitive files, waiting for an operator.

Approving re-validates the waiting operation against the namespace as it is *now* and commits
it as a new version in the same transaction that records the approval (fenced like a merge),
then publishes it. If it no longer applies (say the entry it replaces is gone), nothing is
written and the approval stays pending: reject it instead.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.table import Table

from worker.cli.common import namespace_from, print_json
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    describe_delivery,
    now_utc,
    operator_name,
    operator_session,
    publish,
)
from worker.consolidation.apply import apply_plan
from worker.consolidation.types import AppliedPlan, NamespaceState, Plan
from worker.consolidation.validate import validate_plan
from worker.errors import InvalidPlan
from worker.models import Candidate
from worker.settings import Settings
from worker.store.records import ApprovalInfo

IdArg = Annotated[int, typer.Argument(metavar="ID", help="The approval id (`approvals list`).")]
ByOpt = Annotated[str | None, typer.Option("--by", help="Who decides (default: operator:<login>).")]


def register(app: typer.Typer) -> None:
    approvals = typer.Typer(
        help="Changes waiting for an operator: list, approve, reject.", no_args_is_help=True
    )
    approvals.command("list")(list_pending)
    approvals.command("approve")(approve)
    approvals.command("reject")(reject)
    app.add_typer(approvals, name="approvals")


def list_pending(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pending approvals, oldest first (of one namespace, or all)."""
    with operator_session() as runtime:
        key = None
        if user or assistant or namespace or org:
            key = namespace_from(user, assistant, namespace, org).key
        pending = runtime.store.pending_approvals(namespace=key)
        if as_json:
            print_json([_json(a) for a in pending])
            return
        if not pending:
            console.print("no approvals waiting")
            return
        table = Table(title="waiting for approval")
        for column in ("id", "namespace", "path", "operation", "since"):
            table.add_column(column, overflow="fold")
        for a in pending:
            table.add_row(
                str(a.id), a.namespace, a.path, _describe(a.operation),
                a.created_at.isoformat(timespec="seconds"),
            )  # fmt: skip
        console.print(table)


def approve(approval_id: IdArg, by: ByOpt = None, as_json: JsonOpt = False) -> None:
    """Apply a waiting operation as a new version of its file, then publish it."""
    with operator_session() as runtime:
        now = now_utc()
        settings = runtime.settings

        def build(info: ApprovalInfo, state: NamespaceState, files: dict[str, str]) -> AppliedPlan:
            return applied_approval(info, state, files, settings=settings, now=now)

        info, result = runtime.store.apply_approval(
            approval_id,
            by=by or operator_name(),
            build=build,
            sinks=tuple(runtime.sinks),
            now=now,
        )
        delivery = publish(runtime)
        if as_json:
            print_json(
                {
                    **_json(info),
                    "status": "approved",
                    "version": result.version,
                    "files": [{"path": p, "version": v} for p, v in result.files],
                    "published": delivery.delivered,
                }
            )
            return
        files = ", ".join(f"{p} version {v}" for p, v in result.files) or "no file changed"
        console.print(f"approval {info.id} approved and applied to {info.namespace}: {files}")
        console.print(describe_delivery(delivery, runtime))


def reject(approval_id: IdArg, by: ByOpt = None, as_json: JsonOpt = False) -> None:
    """Drop a waiting operation; nothing is written to the file."""
    with operator_session() as runtime:
        info = runtime.store.reject_approval(approval_id, by=by or operator_name(), now=now_utc())
        if as_json:
            print_json({**_json(info), "status": "rejected"})
            return
        console.print(f"approval {info.id} rejected; {info.namespace} {info.path} is unchanged")


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
    # Validation wants the candidates the operation names; stand-ins carry their ids (the
    # originals left the queue when the batch that proposed this change was committed).
    stand_ins = [
        Candidate.model_construct(
            id=cid,
            namespace=state.namespace,
            user_id=None,
            trace_id=f"approval-{info.id}",
            text="",
            created_at=now,
        )
        for cid in info.candidate_ids
    ]
    problems = validate_plan(
        writable,
        stand_ins,
        plan,
        max_removals=settings.max_removals_per_run,
        max_text_bytes=settings.max_text_bytes,
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


def _describe(operation: dict[str, object]) -> str:
    op = str(operation.get("op", "?"))
    text = operation.get("text")
    target = operation.get("entry_id")
    parts = [op]
    if text:
        parts.append(repr(text))
    if target:
        parts.append(f"entry {target}")
    return " ".join(parts)


def _json(a: ApprovalInfo) -> dict[str, Any]:
    return {
        "id": a.id,
        "namespace": a.namespace,
        "path": a.path,
        "operation": a.operation,
        "candidate_ids": list(a.candidate_ids),
        "status": a.status,
        "created_at": a.created_at.isoformat(timespec="seconds"),
    }
