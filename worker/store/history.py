"""What the memory was and why: file versions, rollbacks, operator files and provenance.

Provenance queries are read-only, for operators (``memworker why``, ``candidate``, ``show
--as-of``). The ledger is the record: one row per candidate and namespace, written by the commit
that consumed the candidate (its outcome, the entry it made or confirmed, the plan operation, the
revision; where and when it was said since migration 0008). An entry's ``candidate_ids`` name
the candidates that made or confirmed it (the latest
:data:`~worker.consolidation.plan.MAX_PROVENANCE`).

History is never rewritten. A rollback appends a new version whose content equals the old one,
and restores the entries of that path to what was active at the old version (entries added since
are invalidated, entries invalidated since are re-activated), so the next consolidation renders
the rolled-back file instead of undoing the rollback.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.models import Namespace, Scope, normalise_path
from worker.store import commit as _commit
from worker.store import search as _search
from worker.store.commit import (
    IN_CHUNK,
    NewVersion,
    entry_from_row,
    unified_diff,
    with_current_version,
    write_versions,
)
from worker.store.records import (
    CommitResult,
    EntryProvenance,
    FileInfo,
    FileVersionInfo,
    LedgerInfo,
)
from worker.store.schema import (
    candidate_ledger,
    entries,
    file_versions,
    memory_files,
    namespaces,
)
from worker.types import require_utc

#: The character that escapes ``%`` and ``_`` in a LIKE pattern built from operator text.
LIKE_ESCAPE: Final = "\\"


def _ledger_info(namespace: str, r: Any) -> LedgerInfo:
    return LedgerInfo(
        namespace=namespace,
        candidate_id=r.candidate_id,
        trace_id=r.trace_id,
        outcome=r.outcome,
        reason=r.reason,
        entry_id=r.entry_id,
        run_id=r.run_id,
        recorded_at=r.created_at,
        source=r.source,
        thread_id=r.thread_id,
        said_at=r.said_at,
        operation=r.operation,
        revision=r.revision,
    )


def candidate_ledger_rows(conn: Connection, candidate_id: str) -> list[LedgerInfo]:
    """Every ledger row of ``candidate_id``, in any namespace (one per namespace that
    consumed it), oldest first."""
    stmt = (
        sa.select(candidate_ledger, namespaces.c.key)
        .join(namespaces, namespaces.c.id == candidate_ledger.c.namespace_id)
        .where(candidate_ledger.c.candidate_id == candidate_id)
        .order_by(candidate_ledger.c.id)
    )
    return [_ledger_info(r.key, r) for r in conn.execute(stmt)]


def like_pattern(text: str) -> str:
    """A lower-cased LIKE pattern matching ``text`` anywhere, its wildcards escaped (lower
    case as SQL's ``lower()`` makes it; SQLite's folds ASCII letters only).

    >>> like_pattern("50%_off")
    '%50\\\\%\\\\_off%'
    """
    escaped = (
        text.lower()
        .replace(LIKE_ESCAPE, LIKE_ESCAPE * 2)
        .replace("%", LIKE_ESCAPE + "%")
        .replace("_", LIKE_ESCAPE + "_")
    )
    return f"%{escaped}%"


def entries_containing(conn: Connection, namespace: str, text: str, limit: int) -> list[str]:
    """Ids of up to ``limit`` entries of ``namespace`` whose text contains ``text`` (ignoring
    case), retired ones too: active first, then newest first."""
    stmt = (
        sa.select(entries.c.id)
        .join(namespaces, namespaces.c.id == entries.c.namespace_id)
        .where(
            namespaces.c.key == namespace,
            sa.func.lower(entries.c.text).like(like_pattern(text), escape=LIKE_ESCAPE),
        )
        .order_by(entries.c.invalid_at.is_not(None), entries.c.created_at.desc(), entries.c.id)
        .limit(limit)
    )
    return list(conn.execute(stmt).scalars())


def provenance(conn: Connection, namespace: str, entry_ids: Sequence[str]) -> list[EntryProvenance]:
    """Each entry of ``entry_ids`` (in that order; unknown ids left out) with the file version
    the commit that added it wrote, and the ledger rows of the candidates that made, confirmed
    or retired it (oldest first)."""
    ns_id = conn.execute(
        sa.select(namespaces.c.id).where(namespaces.c.key == namespace)
    ).scalar_one_or_none()
    if ns_id is None or not entry_ids:
        return []
    rows = {}
    for start in range(0, len(entry_ids), IN_CHUNK):
        chunk = list(entry_ids[start : start + IN_CHUNK])
        for r in conn.execute(
            sa.select(entries).where(entries.c.namespace_id == ns_id, entries.c.id.in_(chunk))
        ):
            rows[r.id] = r
    found = [rows[i] for i in dict.fromkeys(entry_ids) if i in rows]
    ledger = _ledger_of(conn, ns_id, namespace, found)
    versions = _versions_at(conn, ns_id, {(r.path, r.added_version) for r in found})
    return [
        EntryProvenance(
            namespace=namespace,
            entry=entry_from_row(r),
            added_revision=r.added_version,
            invalidated_revision=r.invalidated_version,
            file_version=versions.get((r.path, r.added_version)),
            ledger=tuple(
                row
                for row in ledger
                if row.entry_id == r.id or row.candidate_id in set(r.candidate_ids)
            ),
        )
        for r in found
    ]


def _ledger_of(
    conn: Connection, ns_id: int, namespace: str, found: Sequence[Any]
) -> list[LedgerInfo]:
    """The namespace's ledger rows naming one of ``found``'s entries or candidates."""
    ids = sorted({r.id for r in found})
    cids = sorted({c for r in found for c in r.candidate_ids})
    out: dict[int, LedgerInfo] = {}
    for column, values in (
        (candidate_ledger.c.entry_id, ids),
        (candidate_ledger.c.candidate_id, cids),
    ):
        for start in range(0, len(values), IN_CHUNK):
            stmt = sa.select(candidate_ledger).where(
                candidate_ledger.c.namespace_id == ns_id,
                column.in_(values[start : start + IN_CHUNK]),
            )
            for r in conn.execute(stmt):
                out[r.id] = _ledger_info(namespace, r)
    return [out[k] for k in sorted(out)]


def _versions_at(
    conn: Connection, ns_id: int, wanted: set[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """``(path, namespace revision) -> file version`` written at that revision, where one was."""
    found: dict[tuple[str, int], int] = {}
    revisions = sorted({rev for _, rev in wanted})
    for start in range(0, len(revisions), IN_CHUNK):
        stmt = (
            sa.select(
                memory_files.c.path, file_versions.c.namespace_version, file_versions.c.version
            )
            .join(file_versions, file_versions.c.file_id == memory_files.c.id)
            .where(
                memory_files.c.namespace_id == ns_id,
                file_versions.c.namespace_version.in_(revisions[start : start + IN_CHUNK]),
            )
        )
        for path, revision, version in conn.execute(stmt):
            if (path, revision) in wanted:
                found[(path, revision)] = version
    return found


def files_as_of(conn: Connection, namespace: str, at: datetime) -> dict[str, FileVersionInfo]:
    """Path -> the version of each file of ``namespace`` that was current at ``at`` (files
    first written later are left out)."""
    at = require_utc(at, "as_of")
    latest = (
        sa.select(
            file_versions.c.file_id,
            sa.func.max(file_versions.c.version).label("version"),
        )
        .join(memory_files, memory_files.c.id == file_versions.c.file_id)
        .join(namespaces, namespaces.c.id == memory_files.c.namespace_id)
        .where(namespaces.c.key == namespace, file_versions.c.created_at <= at)
        .group_by(file_versions.c.file_id)
        .subquery()
    )
    stmt = (
        sa.select(memory_files.c.path, file_versions)
        .join(latest, latest.c.file_id == memory_files.c.id)
        .join(
            file_versions,
            sa.and_(
                file_versions.c.file_id == latest.c.file_id,
                file_versions.c.version == latest.c.version,
            ),
        )
        .order_by(memory_files.c.path)
    )
    return {
        r.path: FileVersionInfo(
            path=r.path,
            version=r.version,
            content=r.content,
            diff=r.diff,
            author=r.author,
            run_id=r.run_id,
            namespace_version=r.namespace_version,
            created_at=r.created_at,
        )
        for r in conn.execute(stmt)
    }


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
    ns_id, version = _commit.advance(conn, namespace, expected=None, applied_position=None, now=now)
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
    _search.sync_path(conn, ns_id, target.path)
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
    ns_id, version = _commit.advance(conn, namespace, expected=None, applied_position=None, now=now)
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
