"""Pending approvals: changes to read-only or sensitive paths, waiting for an operator.

Deciding only records the decision; applying an approved operation is the caller's work
(it goes through a normal commit).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.store.records import ApprovalInfo
from worker.store.schema import approvals, namespaces
from worker.store.sqltypes import require_utc


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
        raise NotFound(f"approval {approval_id} does not exist; `memworker approvals` lists them")
    if changed is None:
        raise NotFound(
            f"approval {approval_id} is not pending: it was {row.status} by {row.decided_by} "
            f"at {row.decided_at.isoformat()}"
        )
    return _info(row)
