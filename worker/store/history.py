"""File history: listing versions, rolling a file back, and operator-written files.

History is never rewritten. A rollback appends a new version whose content equals the old
one, and restores the entries of that path to what was active at the old version (entries
added since are invalidated, entries invalidated since are re-activated), so the next
consolidation renders the rolled-back file instead of undoing the rollback.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.models import Namespace, Scope, normalise_path
from worker.store import fence
from worker.store import search_index
from worker.store.files import NewVersion, unified_diff, with_current_version, write_versions
from worker.store.provenance import LIKE_ESCAPE, like_pattern
from worker.store.records import CommitResult, FileInfo, FileVersionInfo
from worker.store.schema import entries, file_versions, memory_files, namespaces
from worker.store.sqltypes import require_utc


def _file_row(conn: Connection, namespace: str, path: str) -> Any:
    row = conn.execute(
        sa.select(memory_files)
        .join(namespaces, namespaces.c.id == memory_files.c.namespace_id)
        .where(namespaces.c.key == namespace, memory_files.c.path == path)
    ).first()
    if row is None:
        raise NotFound(f"{namespace} has no file {path}; `memworker show` lists the files it has")
    return row


def _version_info(path: str, r: Any) -> FileVersionInfo:
    return FileVersionInfo(
        path=path,
        version=r.version,
        content=r.content,
        diff=r.diff,
        author=r.author,
        run_id=r.run_id,
        namespace_version=r.namespace_version,
        created_at=r.created_at,
    )


def file_history(conn: Connection, namespace: str, path: str) -> list[FileVersionInfo]:
    """Every version of one file, oldest first."""
    path = normalise_path(path)
    file = _file_row(conn, namespace, path)
    rows = conn.execute(
        sa.select(file_versions)
        .where(file_versions.c.file_id == file.id)
        .order_by(file_versions.c.version)
    )
    return [_version_info(path, r) for r in rows]


def file_version(conn: Connection, namespace: str, path: str, version: int) -> FileVersionInfo:
    """One version of one file; :class:`NotFound` names the versions that exist."""
    path = normalise_path(path)
    file = _file_row(conn, namespace, path)
    row = conn.execute(
        sa.select(file_versions).where(
            file_versions.c.file_id == file.id, file_versions.c.version == version
        )
    ).first()
    if row is None:
        raise NotFound(
            f"{namespace} {path} has no version {version}; it has versions 1 to "
            f"{file.current_version}"
        )
    return _version_info(path, row)


def list_files(conn: Connection, namespace: str) -> list[FileInfo]:
    """The files of ``namespace`` with their current version, by path."""
    stmt = (
        sa.select(memory_files, file_versions.c.content)
        .select_from(with_current_version())
        .join(namespaces, namespaces.c.id == memory_files.c.namespace_id)
        .where(namespaces.c.key == namespace)
        .order_by(memory_files.c.path)
    )
    return [
        FileInfo(
            path=r.path,
            current_version=r.current_version,
            size=len(r.content.encode("utf-8")),
            operator_owned=bool(r.operator_owned),
            created_at=r.created_at,
            modified_at=r.modified_at,
        )
        for r in conn.execute(stmt)
    ]


def list_namespaces(
    conn: Connection,
    *,
    scope: str | None,
    user_id: str | None,
    containing: str | None = None,
    limit: int | None = None,
) -> list[str]:
    """Namespace keys with at least one commit, optionally of one scope and/or one user, or
    whose key contains ``containing`` (any case); the first ``limit`` by key."""
    stmt = sa.select(namespaces.c.key).order_by(namespaces.c.key)
    if scope is not None:
        stmt = stmt.where(namespaces.c.scope == Scope(scope).value)
    if user_id is not None:
        stmt = stmt.where(namespaces.c.user_id == user_id)
    if containing:
        stmt = stmt.where(
            sa.func.lower(namespaces.c.key).like(like_pattern(containing), escape=LIKE_ESCAPE)
        )
    if limit is not None:
        stmt = stmt.limit(limit)
    return list(conn.execute(stmt).scalars())


def rollback_file(
    conn: Connection,
    *,
    namespace: str,
    path: str,
    to_version: int,
    author: str,
    sinks: Sequence[str],
    now: datetime,
) -> CommitResult:
    """Append a version equal to ``to_version`` and restore that version's entries."""
    now = require_utc(now, "now")
    target = file_version(conn, namespace, path, to_version)
    file = _file_row(conn, namespace, target.path)
    current = file_version(conn, namespace, target.path, file.current_version)
    ns_id, version = fence.advance(conn, namespace, expected=None, applied_position=None, now=now)
    at = target.namespace_version
    of_path = sa.and_(entries.c.namespace_id == ns_id, entries.c.path == target.path)
    conn.execute(
        sa.update(entries)
        .where(of_path, entries.c.added_version > at, entries.c.invalid_at.is_(None))
        .values(
            invalid_at=now,
            invalid_reason=f"rolled back to version {to_version}",
            invalidated_version=version,
        )
    )
    conn.execute(
        sa.update(entries)
        .where(
            of_path,
            entries.c.added_version <= at,
            entries.c.invalidated_version.is_not(None),
            entries.c.invalidated_version > at,
        )
        .values(invalid_at=None, invalid_reason=None, superseded_by=None, invalidated_version=None)
    )
    search_index.sync_path(conn, ns_id, target.path)
    written, outbox_ids = write_versions(
        conn,
        namespace_id=ns_id,
        namespace=namespace,
        namespace_version=version,
        changes=[
            NewVersion(
                target.path,
                target.content,
                unified_diff(target.path, current.content, target.content),
            )
        ],
        author=author,
        run_id=None,
        sinks=sinks,
        now=now,
    )
    return CommitResult(
        version=version, run_id=None, files=tuple(written), outbox_ids=tuple(outbox_ids)
    )


def put_file(
    conn: Connection,
    *,
    namespace: str,
    path: str,
    content: str,
    author: str,
    sinks: Sequence[str],
    now: datetime,
) -> CommitResult:
    """Write an operator-authored file; it becomes read-only for the consolidator."""
    now = require_utc(now, "now")
    Namespace.parse(namespace)
    path = normalise_path(path)
    previous = conn.execute(
        sa.select(file_versions.c.content)
        .select_from(with_current_version())
        .join(namespaces, namespaces.c.id == memory_files.c.namespace_id)
        .where(namespaces.c.key == namespace, memory_files.c.path == path)
    ).scalar_one_or_none()
    ns_id, version = fence.advance(conn, namespace, expected=None, applied_position=None, now=now)
    written, outbox_ids = write_versions(
        conn,
        namespace_id=ns_id,
        namespace=namespace,
        namespace_version=version,
        changes=[NewVersion(path, content, unified_diff(path, previous, content))],
        author=author,
        run_id=None,
        sinks=sinks,
        now=now,
        operator_owned=True,
    )
    return CommitResult(
        version=version, run_id=None, files=tuple(written), outbox_ids=tuple(outbox_ids)
    )
