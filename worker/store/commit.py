"""Committing a consolidated batch in one transaction (a namespace's state is read by
:mod:`worker.store.snapshot`).

The commit is the pipeline's only write: version fence, entries, file versions, ledger,
applied log position, approvals, the run row and the outbox rows either all land or none do.
A batch whose candidates are already in the ledger (a redelivery) raises
:class:`StaleVersion` like a lost race: in both cases the caller acknowledges nothing new.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import InvalidPlan, StaleVersion, StoreRefused
from worker.store import fence
from worker.store import search_index
from worker.store.files import NewVersion, write_versions
from worker.store.records import CONSOLIDATOR_AUTHOR, CommitResult, RunRecord
from worker.store.runs import insert_run
from worker.store.schema import approvals, candidate_ledger, entries
from worker.store.snapshot import IN_CHUNK
from worker.values import AppliedPlan, Entry, PendingApproval


def commit_batch(
    conn: Connection,
    *,
    namespace: str,
    expected_version: int,
    applied_position: str | None,
    applied: AppliedPlan,
    run: RunRecord,
    sinks: Sequence[str],
    now: datetime | None,
) -> CommitResult:
    """Write one consolidated batch; the caller owns the transaction (and its rollback).

    ``now=None`` reads the database's clock in this transaction (on PostgreSQL with the fence
    statement: no round trip of its own); the run's ``finished_at``, when unset, is that time
    too.
    """
    if run.namespace not in (None, namespace):
        raise StoreRefused(f"the run is for {run.namespace}, but the commit is for {namespace}")
    sinks = list(dict.fromkeys(sinks))
    ns_id, version, now = fence.advance_at(
        conn,
        namespace,
        expected=expected_version,
        applied_position=applied_position,
        now=now,
    )
    counts = {**applied.counts, **run.counts}
    run_id = insert_run(
        conn,
        RunRecord(**{**run.__dict__, "counts": counts, "finished_at": run.finished_at or now}),
        namespace=namespace,
    )
    if applied.new_entries:
        rows = [_entry_row(ns_id, e, added_version=version) for e in applied.new_entries]
        _insert_rows(conn, entries, rows)
    if applied.changed_entries:
        _update_entries(conn, ns_id, namespace, applied.changed_entries, version)
    # The search index moves with the entries, in this transaction (never a half-commit).
    search_index.sync_written(conn, ns_id, new=applied.new_entries, changed=applied.changed_entries)
    written, outbox_ids = write_versions(
        conn,
        namespace_id=ns_id,
        namespace=namespace,
        namespace_version=version,
        changes=[NewVersion(f.path, f.content, f.diff) for f in applied.files],
        author=CONSOLIDATOR_AUTHOR,
        run_id=run_id,
        sinks=sinks,
        now=now,
    )
    if applied.ledger:
        _insert_ledger(
            conn,
            ns_id=ns_id,
            namespace=namespace,
            applied=applied,
            run_id=run_id,
            now=now,
            revision=version,
        )
    if applied.approvals:
        _insert_approvals(conn, ns_id, applied.approvals, run_id=run_id, now=now)
    return CommitResult(
        version=version, run_id=run_id, files=tuple(written), outbox_ids=tuple(outbox_ids)
    )


def _insert_approvals(
    conn: Connection,
    ns_id: int,
    pending: Sequence[PendingApproval],
    *,
    run_id: int | None,
    now: datetime,
) -> None:
    conn.execute(
        sa.insert(approvals),
        [
            {
                "namespace_id": ns_id,
                "path": a.path,
                "operation": dict(a.operation),
                "candidate_ids": list(a.candidate_ids),
                "status": "pending",
                "run_id": run_id,
                "created_at": now,
            }
            for a in pending
        ],
    )


def _entry_row(ns_id: int, e: Entry, *, added_version: int) -> dict[str, Any]:
    return {
        "namespace_id": ns_id,
        "id": e.id,
        "path": e.path,
        "text": e.text,
        "key": e.key,
        "valid_from": e.valid_from,
        "invalid_at": e.invalid_at,
        "invalid_reason": e.invalid_reason,
        "superseded_by": e.superseded_by,
        "confirmations": e.confirmations,
        "candidate_ids": list(e.candidate_ids),
        "trace_ids": list(e.trace_ids),
        "created_at": e.created_at,
        "last_confirmed_at": e.last_confirmed_at,
        "added_version": added_version,
        "invalidated_version": added_version if e.invalid_at is not None else None,
    }


def _update_entries(
    conn: Connection, ns_id: int, namespace: str, changed: Sequence[Entry], version: int
) -> None:
    ids = [e.id for e in changed]
    stored: dict[str, int | None] = {}
    for start in range(0, len(ids), IN_CHUNK):
        for row in conn.execute(
            sa.select(entries.c.id, entries.c.invalid_at, entries.c.invalidated_version).where(
                entries.c.namespace_id == ns_id, entries.c.id.in_(ids[start : start + IN_CHUNK])
            )
        ):
            # Keep the version that first invalidated an entry; a still-active entry has none.
            stored[row.id] = row.invalidated_version if row.invalid_at is not None else None
    missing = [i for i in ids if i not in stored]
    if missing:
        raise InvalidPlan([f"changed entry {i} does not exist in {namespace}" for i in missing])
    params = []
    for e in changed:
        values = _entry_row(ns_id, e, added_version=version)
        del values["added_version"]
        values["invalidated_version"] = None if e.invalid_at is None else (stored[e.id] or version)
        params.append({"b_" + k: v for k, v in values.items()})
    # Bind names must differ from column names in an executemany UPDATE.
    conn.execute(
        sa.update(entries)
        .where(
            entries.c.namespace_id == sa.bindparam("b_namespace_id"),
            entries.c.id == sa.bindparam("b_id"),
        )
        .values({k: sa.bindparam("b_" + k) for k in _ENTRY_UPDATE_COLUMNS}),
        params,
    )


_ENTRY_UPDATE_COLUMNS: Final = (
    "path",
    "text",
    "key",
    "valid_from",
    "invalid_at",
    "invalid_reason",
    "superseded_by",
    "confirmations",
    "candidate_ids",
    "trace_ids",
    "created_at",
    "last_confirmed_at",
    "invalidated_version",
)


def _insert_ledger(
    conn: Connection,
    *,
    ns_id: int,
    namespace: str,
    applied: AppliedPlan,
    run_id: int,
    now: datetime,
    revision: int,
) -> None:
    rows = [
        {
            "namespace_id": ns_id,
            "candidate_id": r.candidate_id,
            "trace_id": r.trace_id,
            "outcome": r.outcome,
            "reason": r.reason,
            "entry_id": r.entry_id,
            "run_id": run_id,
            "created_at": now,
            "source": r.source,
            "thread_id": r.thread_id,
            "said_at": r.said_at,
            "operation": r.operation,
            "revision": revision,
        }
        for r in applied.ledger
    ]
    if len({r.candidate_id for r in applied.ledger}) != len(rows):
        raise InvalidPlan(["the ledger names a candidate twice; every candidate gets one row"])
    try:
        _insert_rows(conn, candidate_ledger, rows)
    except sa.exc.IntegrityError:
        raise StaleVersion(
            f"candidates of this batch are already in the ledger of {namespace}: a redelivered "
            "batch. Nothing was written; acknowledge the batch without merging it again"
        ) from None


def _insert_rows(conn: Connection, table: sa.Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert a batch's ``rows`` (dicts with the same keys): one ``executemany``, which costs
    one round trip on both databases.

    On PostgreSQL psycopg sends an ``executemany`` in pipeline mode (every row's parameters in
    one round trip) to a statement it prepared once per connection, so the server neither
    parses nor plans it again. A multi-row ``INSERT … VALUES (…), (…)`` (SQLAlchemy's
    "insertmanyvalues", what an ``INSERT … RETURNING`` executemany becomes) was measured slower
    for a batch of 40: its text grows with the rows (16 columns × 40 rows of placeholders for
    entries), too long for psycopg's cache of converted queries, so every batch re-parsed it
    client-side (about twice the CPU of the pipelined executemany: 5 ms against 2.5 ms for 40
    entries), and the server plans each such statement anew. SQLite runs its ``executemany``
    in C over one prepared statement.
    """
    if rows:
        conn.execute(sa.insert(table), list(rows))
