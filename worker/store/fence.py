"""The namespace version fence: every write to a namespace moves its version by exactly one.

A consolidation commit passes the version it read (``expected``); the bump is
``UPDATE … SET version = expected + 1 WHERE key = … AND version = expected``, so of two
commits that read the same version exactly one matches a row. On PostgreSQL the loser blocks
on the row lock and then sees the new version; on SQLite write transactions are serialised by
``BEGIN IMMEDIATE``. The first commit of a namespace inserts its row instead, and the unique
key turns a concurrent first commit into :class:`StaleVersion` the same way.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import StaleVersion, StoreRefused
from worker.models import Namespace
from worker.store.engine import dialect_insert
from worker.store.schema import namespaces


def advance(
    conn: Connection,
    namespace: str,
    *,
    expected: int | None,
    applied_position: str | None,
    now: datetime,
) -> tuple[int, int]:
    """Bump ``namespace``'s version; return ``(namespace row id, new version)``.

    ``expected=None`` bumps unconditionally (operator writes: put, rollback, import), which
    still makes any consolidation that read the old version stale.
    """
    ns = Namespace.parse(namespace)
    if expected is not None and expected < 0:
        raise StoreRefused(f"expected_version must be >= 0, got {expected}")
    if expected == 0:
        # Version 0 means the namespace was never committed, so its row almost never exists:
        # insert first and save the UPDATE that would match nothing. If the row does exist
        # (or a concurrent first commit holds the key), nothing is inserted and the fenced
        # UPDATE below decides, exactly as before: it only matches a row still at version 0.
        created = conn.execute(
            dialect_insert(conn, namespaces)
            .values(_new_row(ns, namespace, applied_position, now))
            .on_conflict_do_nothing(index_elements=[namespaces.c.key])
            .returning(namespaces.c.id)
        ).scalar_one_or_none()
        if created is not None:
            return int(created), 1
    values: dict[str, object] = {"version": namespaces.c.version + 1, "updated_at": now}
    if applied_position is not None:
        values["applied_position"] = applied_position
    stmt = sa.update(namespaces).where(namespaces.c.key == namespace)
    if expected is not None:
        stmt = stmt.where(namespaces.c.version == expected)
    row = conn.execute(stmt.values(values).returning(namespaces.c.id, namespaces.c.version)).first()
    if row is not None:
        return int(row.id), int(row.version)
    if expected is not None:
        raise _stale(namespace, expected)
    try:
        new_id = conn.execute(
            sa.insert(namespaces)
            .values(_new_row(ns, namespace, applied_position, now))
            .returning(namespaces.c.id)
        ).scalar_one()
    except sa.exc.IntegrityError:
        # Another transaction created the namespace first.
        raise _stale(namespace, 0) from None
    return int(new_id), 1


def _new_row(
    ns: Namespace, namespace: str, applied_position: str | None, now: datetime
) -> dict[str, object]:
    """The row of a namespace's first commit (version 1)."""
    return {
        "key": namespace,
        "scope": ns.scope.value,
        "user_id": ns.user_id,
        "assistant_id": ns.assistant_id,
        "org_id": ns.org_id,
        "version": 1,
        "applied_position": applied_position,
        "created_at": now,
        "updated_at": now,
    }


def namespace_id(conn: Connection, namespace: str) -> int | None:
    """The row id of ``namespace``, or None when it was never committed."""
    value = conn.execute(
        sa.select(namespaces.c.id).where(namespaces.c.key == namespace)
    ).scalar_one_or_none()
    return None if value is None else int(value)


def _stale(namespace: str, expected: int) -> StaleVersion:
    return StaleVersion(
        f"namespace {namespace} is no longer at version {expected}: another batch committed "
        "first. Reload its state and merge again (nothing was written)"
    )
