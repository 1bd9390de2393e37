"""Pending approvals: changes to read-only or sensitive paths, waiting for an operator.

:func:`decide` only records the decision. :func:`apply_approved` decides *and* commits the
waiting operation in the caller's transaction, so an approval is never marked approved without
its change, nor applied twice; how the operation becomes file content is the ``build``
callback's business (the store does not run consolidation logic).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.store import commit as _commit
from worker.store import snapshot as _snapshot
from worker.store.records import ApprovalInfo, CommitResult, RunRecord
from worker.store.schema import approvals, candidate_ledger, namespaces
from worker.store.sqltypes import require_utc
from worker.values import AppliedPlan, NamespaceState


def _info(r: Any) -> ApprovalInfo:
    return ApprovalInfo(
        id=int(r.id),
        namespace=r.key,
        path=r.path,
        operation=dict(r.operation),
        candidate_ids=tuple(r.candidate_ids),
        status=r.status,
        created_at=r.created_at,
        decided_at=r.decided_at,
        decided_by=r.decided_by,
    )


def _select() -> sa.Select[Any]:
    return sa.select(approvals, namespaces.c.key).join(
        namespaces, namespaces.c.id == approvals.c.namespace_id
    )


def pending(conn: Connection, *, namespace: str | None, limit: int) -> list[ApprovalInfo]:
    """Undecided approvals, oldest first, of one namespace or of all."""
    stmt = _select().where(approvals.c.status == "pending").order_by(approvals.c.id).limit(limit)
    if namespace is not None:
        stmt = stmt.where(namespaces.c.key == namespace)
    return [_info(r) for r in conn.execute(stmt)]


def decide(
    conn: Connection, approval_id: int, *, approve: bool, by: str, now: datetime
) -> ApprovalInfo:
    """Approve or reject a pending approval; a decided or unknown one is :class:`NotFound`."""
    now = require_utc(now, "now")
    changed = conn.execute(
        sa.update(approvals)
        .where(approvals.c.id == approval_id, approvals.c.status == "pending")
        .values(status="approved" if approve else "rejected", decided_at=now, decided_by=by)
        .returning(approvals.c.id)
    ).first()
    row = conn.execute(_select().where(approvals.c.id == approval_id)).first()
    if row is None:
        raise NotFound(
            f"approval {approval_id} does not exist; `memworker approvals list` lists them"
        )
    if changed is None:
        raise NotFound(
            f"approval {approval_id} is not pending: it was {row.status} by {row.decided_by} "
            f"at {row.decided_at.isoformat()}"
        )
    return _info(row)


#: Builds what approving commits: ``(approval, namespace state, current files) -> applied``.
ApprovalBuilder = Callable[[ApprovalInfo, NamespaceState, dict[str, str]], AppliedPlan]


def apply_approved(
    conn: Connection,
    approval_id: int,
    *,
    by: str,
    build: ApprovalBuilder,
    sinks: Sequence[str],
    now: datetime,
) -> tuple[ApprovalInfo, CommitResult]:
    """Approve ``approval_id`` and commit its operation as a new version, fenced like a merge."""
    info = decide(conn, approval_id, approve=True, by=by, now=now)
    state = _snapshot.load_state(conn, info.namespace)
    applied = build(info, state, _snapshot.current_files(conn, info.namespace))
    result = _commit.commit_batch(
        conn,
        namespace=info.namespace,
        expected_version=state.version,
        applied_position=state.applied_position,
        applied=applied,
        run=RunRecord(
            trigger="cli",
            namespace=info.namespace,
            started_at=now,
            finished_at=now,
            outcome="ok",
            candidates=len(info.candidate_ids),
            counts={"approved": 1},
        ),
        sinks=sinks,
        now=now,
    )
    op = info.operation.get("op")
    settle_ledger(
        conn,
        info,
        outcome="forgotten" if op == "invalidate" else "merged",
        reason=f"approved by {by}",
    )
    return info, result


def reject(conn: Connection, approval_id: int, *, by: str, now: datetime) -> ApprovalInfo:
    """Reject ``approval_id``; its candidates' ledger rows say so."""
    info = decide(conn, approval_id, approve=False, by=by, now=now)
    settle_ledger(conn, info, outcome="rejected", reason=f"rejected by {by}")
    return info


def settle_ledger(conn: Connection, info: ApprovalInfo, *, outcome: str, reason: str) -> None:
    """Ledger rows still ``pending_approval`` for the approval's candidates get the decision."""
    if not info.candidate_ids:
        return
    ns_id = sa.select(namespaces.c.id).where(namespaces.c.key == info.namespace).scalar_subquery()
    conn.execute(
        sa.update(candidate_ledger)
        .where(
            candidate_ledger.c.namespace_id == ns_id,
            candidate_ledger.c.candidate_id.in_(list(info.candidate_ids)),
            candidate_ledger.c.outcome == "pending_approval",
        )
        .values(outcome=outcome, reason=reason)
    )
