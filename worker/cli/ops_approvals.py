"""``memworker approvals``: changes to read-only or sensitive files, waiting for an operator.

Approving re-validates the waiting operation against the namespace as it is *now* and commits
it as a new version (see :mod:`worker.service.approve`), then publishes it. If it no longer
applies (say the entry it replaces is gone), nothing is written and the approval stays
pending: reject it instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    describe_delivery,
    operator_name,
    operator_session,
    record_delivery,
)

if TYPE_CHECKING:
    from worker.store.records import ApprovalInfo

IdArg = Annotated[int, typer.Argument(metavar="ID", help="The approval id (`approvals list`).")]
ByOpt = Annotated[str | None, typer.Option("--by", help="Who decides (default: operator:<login>).")]


def register_approvals(app: typer.Typer) -> None:
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
    from rich.table import Table

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
    from worker.service.approve import approve as approve_change

    with operator_session(writes=True) as runtime:
        done = approve_change(
            runtime.store,
            runtime.settings.for_consolidation,
            runtime.sinks,
            approval_id,
            by=by or operator_name(),
        )
        info, result = done.info, done.result
        delivery = record_delivery(done.delivery)
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
    from worker.service.approve import reject as reject_change

    with operator_session() as runtime:
        info = reject_change(runtime.store, approval_id, by=by or operator_name())
        if as_json:
            print_json({**_json(info), "status": "rejected"})
            return
        console.print(f"approval {info.id} rejected; {info.namespace} {info.path} is unchanged")


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
