"""Erasing namespaces from SQL: every row that holds or names their memories goes.

Sinks still hold copies, so for each file that existed an ``erase`` tombstone is queued per
sink (the sinks that ever received the namespace, plus any named). A delivered tombstone is
deleted, after which nothing of the namespace remains in the database but its erase fence: a
version number under a digest of the key (see :mod:`worker.store.fence`), which makes any
commit that read the namespace before the erase fail as stale.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.store import fence

from worker.store import search_index

from worker.store import vectors
from worker.store.clock import resolve
from worker.store.outbox import in_doubt
from worker.store.records import EraseReport
from worker.store.schema import (
    approvals,
    candidate_ledger,
    entries,
    file_versions,
    memory_files,
    namespaces,
    outbox,
    runs,
    source_cursors,
)


def erase_namespaces(
    conn: Connection, keys: Sequence[str], *, sinks: Sequence[str], now: datetime | None
) -> EraseReport:
    """Delete everything of ``keys``; queue tombstones (due at ``now``: the database's clock
    when None); report rows deleted per table."""
    now = resolve(conn, now)
    keys = sorted(set(keys))
    placeholders = fence.take_for_erase(conn, keys, now=now)
    ns_ids = list(
        conn.execute(sa.select(namespaces.c.id).where(namespaces.c.key.in_(keys))).scalars()
    )
    items, all_sinks = _published(conn, keys, ns_ids, sinks)
    doubt = in_doubt(conn, keys, now=now)  # writes that may still land: delete again after
    deleted = _delete_rows(conn, keys, ns_ids)
    deleted["namespaces"] -= placeholders  # rows the fence created only to lock the key
    tombstones = [
        {
            "file_version_id": None,
            "sink": sink,
            "kind": "erase",
            "namespace": key,
            "path": path,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
            "in_doubt_until": doubt.get((sink, key, path)),
        }
        for key, path in items
        for sink in all_sinks
    ]
    if tombstones:
        conn.execute(sa.insert(outbox), tombstones)
    return EraseReport(namespaces=tuple(keys), deleted=deleted, tombstones=len(tombstones))


def _published(
    conn: Connection, keys: Sequence[str], ns_ids: Sequence[int], sinks: Sequence[str]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The (namespace, path) pairs the sinks may hold a copy of, and every sink to tell."""
    paths = conn.execute(
        sa.select(namespaces.c.key, memory_files.c.path)
        .join(memory_files, memory_files.c.namespace_id == namespaces.c.id)
        .where(namespaces.c.id.in_(ns_ids))
    ).all()
    seen_sinks = set(
        conn.execute(
            sa.select(outbox.c.sink).where(outbox.c.namespace.in_(keys)).distinct()
        ).scalars()
    )
    # Paths only known from pending tombstones of an earlier erase still need deleting.
    old_tombstones = conn.execute(
        sa.select(outbox.c.namespace, outbox.c.path).where(
            outbox.c.namespace.in_(keys), outbox.c.kind == "erase"
        )
    ).all()
    items = sorted({(r[0], r[1]) for r in [*paths, *old_tombstones]})
    return items, sorted(seen_sinks | set(sinks))


def _delete_rows(conn: Connection, keys: Sequence[str], ns_ids: Sequence[int]) -> dict[str, int]:
    """Delete every row of the namespaces, table by table; rows deleted per table."""
    of_namespace = sa.select(memory_files.c.id).where(memory_files.c.namespace_id.in_(ns_ids))
    deleted: dict[str, int] = {}

    def run(name: str, stmt: sa.Delete) -> None:
        deleted[name] = deleted.get(name, 0) + conn.execute(stmt).rowcount

    run("outbox", sa.delete(outbox).where(outbox.c.namespace.in_(keys)))
    run("file_versions", sa.delete(file_versions).where(file_versions.c.file_id.in_(of_namespace)))
    run("memory_files", sa.delete(memory_files).where(memory_files.c.namespace_id.in_(ns_ids)))
    # The search index and the vectors go in this transaction too: nothing finds erased text.
    search_index.drop_namespaces(conn, ns_ids)
    vectors.drop_namespace_vectors(conn, ns_ids)
    run("entries", sa.delete(entries).where(entries.c.namespace_id.in_(ns_ids)))
    run(
        "candidate_ledger",
        sa.delete(candidate_ledger).where(candidate_ledger.c.namespace_id.in_(ns_ids)),
    )
    run("approvals", sa.delete(approvals).where(approvals.c.namespace_id.in_(ns_ids)))
    run("runs", sa.delete(runs).where(runs.c.namespace.in_(keys)))
    run(
        "source_cursors",
        sa.delete(source_cursors).where(
            sa.or_(source_cursors.c.namespace.in_(keys), source_cursors.c.key.in_(keys))
        ),
    )
    run("namespaces", sa.delete(namespaces).where(namespaces.c.id.in_(ns_ids)))
    return deleted
