"""Writing new file versions, shared by commits, rollbacks, operator puts and imports.

A file's history is append-only: every change is a new ``file_versions`` row numbered
``current_version + 1``, and each new version gets one outbox row per sink in the same
transaction, so a sink can only ever see committed versions.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import InvalidPlan
from worker.store.engine import dialect_insert_for
from worker.store.schema import file_versions, memory_files, outbox


@dataclass(frozen=True)
class NewVersion:
    """Content to append to one file's history."""

    path: str
    content: str
    diff: str


def with_current_version(*, outer: bool = False) -> sa.Join:
    """Each file joined with its current version (``outer``: files without one kept, as None)."""
    return memory_files.join(
        file_versions,
        sa.and_(
            file_versions.c.file_id == memory_files.c.id,
            file_versions.c.version == memory_files.c.current_version,
        ),
        isouter=outer,
    )


def unified_diff(path: str, old: str | None, new: str) -> str:
    """The unified diff from ``old`` (None: no file yet) to ``new``.

    >>> print(unified_diff("/memories/a.md", "x\\n", "y\\n"), end="")
    --- a/memories/a.md
    +++ b/memories/a.md
    @@ -1 +1 @@
    -x
    +y
    """
    return "".join(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile="a" + path if old is not None else "/dev/null",
            tofile="b" + path,
        )
    )


def write_versions(
    conn: Connection,
    *,
    namespace_id: int,
    namespace: str,
    namespace_version: int,
    changes: Sequence[NewVersion],
    author: str,
    run_id: int | None,
    sinks: Sequence[str],
    now: datetime,
    operator_owned: bool | None = None,
) -> tuple[list[tuple[str, int]], list[int]]:
    """Append one version per change; return ``[(path, version)]`` and the outbox row ids.

    ``operator_owned`` marks (True) or unmarks (False) the files as operator-written; None
    leaves the flag as it is.
    """
    if not changes:
        return [], []
    paths = [c.path for c in changes]
    if len(set(paths)) != len(paths):
        dupes = sorted({p for p in paths if paths.count(p) > 1})
        raise InvalidPlan([f"file {p} is changed twice in one commit" for p in dupes])
    files = _advance_files(conn, namespace_id, paths, operator_owned=operator_owned, now=now)
    written = [(c.path, files[c.path][1]) for c in changes]
    version_ids = [
        int(row.id)
        for row in conn.execute(
            sa.insert(file_versions).returning(file_versions.c.id, sort_by_parameter_order=True),
            [
                {
                    "file_id": files[c.path][0],
                    "version": files[c.path][1],
                    "namespace_version": namespace_version,
                    "content": c.content,
                    "diff": c.diff,
                    "run_id": run_id,
                    "author": author,
                    "created_at": now,
                }
                for c in changes
            ],
        )
    ]
    return written, queue_publish(
        conn,
        namespace=namespace,
        items=list(zip(paths, version_ids, strict=True)),
        sinks=sinks,
        now=now,
    )


def _advance_files(
    conn: Connection,
    namespace_id: int,
    paths: Sequence[str],
    *,
    operator_owned: bool | None,
    now: datetime,
) -> dict[str, tuple[int, int]]:
    """Create the files that do not exist yet and bump the others' current version; returns
    ``{path: (file id, the version being written)}``."""
    # One upsert: a new path is inserted at version 1, an existing one moves up by one. The
    # namespace's fence row lock (taken before any file is written) serialises the writers of
    # a namespace, so no other transaction creates or bumps these paths meanwhile.
    rows = conn.execute(
        _advance_statement(conn.dialect.name, set_owner=operator_owned is not None),
        [
            {
                "namespace_id": namespace_id,
                "path": p,
                "current_version": 1,
                "operator_owned": bool(operator_owned),
                "created_at": now,
                "modified_at": now,
            }
            for p in paths
        ],
    )
    return {row.path: (int(row.id), int(row.current_version)) for row in rows}


@functools.cache
def _advance_statement(dialect: str, *, set_owner: bool) -> Any:
    """:func:`_advance_files`'s upsert, built once per dialect (:mod:`worker.store.prebuilt`)
    and run with one parameter set per path; a bumped file takes the new row's time (and,
    with ``set_owner``, its owner)."""
    stmt = dialect_insert_for(dialect, memory_files)
    bump: dict[str, Any] = {
        "current_version": memory_files.c.current_version + 1,
        "modified_at": stmt.excluded.modified_at,
    }
    if set_owner:
        bump["operator_owned"] = stmt.excluded.operator_owned
    return stmt.on_conflict_do_update(
        index_elements=[memory_files.c.namespace_id, memory_files.c.path], set_=bump
    ).returning(memory_files.c.id, memory_files.c.path, memory_files.c.current_version)


def queue_publish(
    conn: Connection,
    *,
    namespace: str,
    items: Sequence[tuple[str, int]],
    sinks: Sequence[str],
    now: datetime,
) -> list[int]:
    """One outbox row per (file version × sink), due now; returns their ids."""
    rows = [
        {
            "file_version_id": version_id,
            "sink": sink,
            "kind": "publish",
            "namespace": namespace,
            "path": path,
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        for path, version_id in items
        for sink in sinks
    ]
    if not rows:
        return []
    result = conn.execute(
        sa.insert(outbox).returning(outbox.c.id, sort_by_parameter_order=True), rows
    )
    return [int(row.id) for row in result]
