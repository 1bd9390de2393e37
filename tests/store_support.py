"""Builders shared by the ``test_store_*`` tests: stores, unique names, and small plans."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from worker.models import AppliedPlan, Entry, FileChange, LedgerRow, PendingApproval
from worker.store import CommitResult, MemoryStore, RunRecord

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
FACTS = "/memories/facts.md"
PREFS = "/memories/preferences.md"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def unique_user() -> str:
    return "u" + uuid.uuid4().hex[:12]


def unique_ns() -> str:
    return f"user:{unique_user()}"


def entry(
    entry_id: str, text: str, *, path: str = FACTS, now: datetime = T0, **kw: object
) -> Entry:
    return Entry(
        id=entry_id,
        path=path,
        text=text,
        valid_from=now,
        created_at=now,
        last_confirmed_at=now,
        candidate_ids=(f"c-{entry_id}",),
        trace_ids=("t1",),
        **kw,
    )


def render(*entries: Entry) -> str:
    return "".join(f"- {e.text}\n" for e in entries)


def plan(
    new: tuple[Entry, ...] = (),
    changed: tuple[Entry, ...] = (),
    *,
    files: dict[str, str] | None = None,
    candidates: tuple[str, ...] | None = None,
    approvals: tuple[PendingApproval, ...] = (),
) -> AppliedPlan:
    """An applied plan adding ``new``; one ledger row per candidate (default: the entries')."""
    if files is None:
        files = {FACTS: render(*new)} if new else {}
    ids = candidates if candidates is not None else tuple(c for e in new for c in e.candidate_ids)
    return AppliedPlan(
        new_entries=new,
        changed_entries=changed,
        files=tuple(FileChange(p, c, f"+{c}", None) for p, c in files.items()),
        ledger=tuple(LedgerRow(c, "t1", "merged") for c in ids),
        approvals=approvals,
        counts={"added": len(new)},
    )


def run(namespace: str, now: datetime = T0) -> RunRecord:
    return RunRecord(
        trigger="queue", namespace=namespace, started_at=now, outcome="ok", candidates=1
    )


def commit(
    store: MemoryStore,
    namespace: str,
    applied: AppliedPlan,
    *,
    expected: int,
    sinks: tuple[str, ...] = (),
    now: datetime = T0,
    position: str | None = "1-0",
) -> CommitResult:
    return store.commit_batch(
        namespace=namespace,
        expected_version=expected,
        applied_position=position,
        applied=applied,
        run=run(namespace, now),
        sinks=sinks,
        now=now,
    )
