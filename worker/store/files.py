"""Writing new file versions, shared by commits, rollbacks, operator puts and imports.

A file's history is append-only: every change is a new ``file_versions`` row numbered
``current_version + 1``, and each new version gets one outbox row per sink in the same
transaction, so a sink can only ever see committed versions.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import InvalidPlan
from worker.store.schema import file_versions, memory_files, outbox


@dataclass(frozen=True)
class NewVersion:
    """Content to append to one file's history."""

    path: str
    content: str
    diff: str


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
    existing = {
        row.path: (int(row.id), int(row.current_version))
        for row in conn.execute(
            sa.select(memory_files.c.id, memory_files.c.path, memory_files.c.current_version).where(
                memory_files.c.namespace_id == namespace_id, memory_files.c.path.in_(paths)
            )
        )
    }
    created = [p for p in paths if p not in existing]
    if created:
        rows = conn.execute(
            sa.insert(memory_files).returning(
                memory_files.c.id, memory_files.c.path, sort_by_parameter_order=True
            ),
            [
                {
                    "namespace_id": namespace_id,
                    "path": p,
                    "current_version": 1,
                    "operator_owned": bool(operator_owned),
                    "created_at": now,
                    "modified_at": now,
                }
                for p in created
            ],
        )
        for row in rows:
            existing[row.path] = (int(row.id), 0)
    updated = [p for p in paths if p not in created]
    if updated:
        values: dict[str, object] = {
            "current_version": sa.bindparam("b_version"),
            "modified_at": now,
        }
        if operator_owned is not None:
            values["operator_owned"] = operator_owned
        conn.execute(
            sa.update(memory_files).where(memory_files.c.id == sa.bindparam("b_id")).values(values),
            [{"b_id": existing[p][0], "b_version": existing[p][1] + 1} for p in updated],
        )
    return {p: (file_id, version + 1) for p, (file_id, version) in existing.items()}


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
