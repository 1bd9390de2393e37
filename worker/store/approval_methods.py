"""The store's approvals repository: changes to read-only or sensitive files, waiting for an
operator, and their decisions (an approval commits like a merge, fenced in one transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from worker.store import approvals as _approvals
from worker.store.records import ApprovalInfo, CommitResult
from worker.store.transactions import Transactions


class ApprovalMethods(Transactions):
    """Pending approvals (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def pending_approvals(
        self, *, namespace: str | None = None, limit: int = 100
    ) -> list[ApprovalInfo]:
        return self._read(
            "listing approvals", lambda c: _approvals.pending(c, namespace=namespace, limit=limit)
        )

    def decide_approval(
        self, approval_id: int, approve: bool, by: str, now: datetime
    ) -> ApprovalInfo:
        return self._write(
            "deciding an approval",
            lambda c: _approvals.decide(c, approval_id, approve=approve, by=by, now=now),
        )

    def apply_approval(
        self,
        approval_id: int,
        *,
        by: str,
        build: _approvals.ApprovalBuilder,
        sinks: Sequence[str] = (),
        now: datetime,
    ) -> tuple[ApprovalInfo, CommitResult]:
        """Approve and commit a waiting operation in one transaction, fenced like a merge.

        ``build`` turns the approval into the applied change; if it raises (e.g. the operation
        no longer validates), nothing is written and the approval stays pending.
        """
        return self._write(
            "applying an approval",
            lambda c: _approvals.apply_approved(
                c, approval_id, by=by, build=build, sinks=sinks, now=now
            ),
        )

    def reject_approval(self, approval_id: int, *, by: str, now: datetime) -> ApprovalInfo:
        """Reject a waiting operation; its candidates' ledger rows record the rejection."""
        return self._write(
            "rejecting an approval", lambda c: _approvals.reject(c, approval_id, by=by, now=now)
        )
