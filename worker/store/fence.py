"""The namespace version fence: every write to a namespace moves its version by exactly one.

A consolidation commit passes the version it read (``expected``); the bump is
``UPDATE … SET version = expected + 1 WHERE key = … AND version = expected``, so of two
commits that read the same version exactly one matches a row. On PostgreSQL the loser blocks
on the row lock and then sees the new version; on SQLite write transactions are serialised by
``BEGIN IMMEDIATE``. The first commit of a namespace inserts its row instead, and the unique
key turns a concurrent first commit into :class:`StaleVersion` the same way.

**Erase takes the fence.** Erasing deletes the namespace row but records its version plus one
in ``namespace_fences`` (under a digest of the key, see :func:`digest`). A commit that read the
namespace before the erase carries an older version, so it is refused as stale even when it
would have been the namespace's first commit: the insert-first path looks for the erase fence
*after* its insert, so on PostgreSQL either the erase sees the committed row (and deletes it)
or the commit sees the committed fence (and rolls back). A state read after the erase reports
the fence as its version (:func:`erased_version`), and its commit recreates the row from there.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import StaleVersion, StoreRefused
from worker.namespaces import Namespace
from worker.store.clock import resolve
from worker.store.engine import dialect_insert, dialect_insert_for
from worker.store.prebuilt import param
from worker.store.schema import erase_generations, namespace_fences, namespaces


def digest(namespace: str) -> str:
    """The key an erased namespace's fence is stored under: never the namespace key itself.

    >>> len(digest("user:u1")), digest("user:u1") == digest("user:u1")
    (64, True)
    """
    return hashlib.sha256(f"memworker-fence:{namespace}".encode()).hexdigest()


#: Built once (:mod:`worker.store.prebuilt`): every batch and every delivery reads these.
_ERASED_VERSION: Final = sa.select(namespace_fences.c.version).where(
    namespace_fences.c.digest == param(namespace_fences.c.digest, "f_digest")
)
_GENERATIONS: Final = sa.select(erase_generations.c.digest, erase_generations.c.generation).where(
    erase_generations.c.digest.in_(param(erase_generations.c.digest, "f_digests", expanding=True))
)


def erased_version(conn: Connection, namespace: str) -> int | None:
    """The version an erase left for ``namespace`` (None: never erased since its last write)."""
    value = conn.execute(_ERASED_VERSION, {"f_digest": digest(namespace)}).scalar_one_or_none()
    return None if value is None else int(value)


def erase_generation(conn: Connection, namespace: str) -> int:
    """How many times ``namespace`` was erased (0: never). Unlike the fence this survives the
    user's return, so "erased since this delivery was made" is a comparison of generations."""
    return generations(conn, [namespace])[namespace]


def generations(conn: Connection, keys: Sequence[str]) -> dict[str, int]:
    """The erase generation of each of ``keys``."""
    by_digest = {digest(k): k for k in keys}
    found = dict.fromkeys(keys, 0)
    if by_digest:
        for d, generation in conn.execute(_GENERATIONS, {"f_digests": list(by_digest)}):
            found[by_digest[d]] = int(generation)
    return found


def _bump_generation(conn: Connection, key: str) -> None:
    """One more erase of ``key`` (under the erase's row lock on the namespace)."""
    conn.execute(
        dialect_insert(conn, erase_generations)
        .values(digest=digest(key), generation=1)
        .on_conflict_do_update(
            index_elements=[erase_generations.c.digest],
            set_={"generation": erase_generations.c.generation + 1},
        )
    )


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
    ns_id, version, _ = advance_at(
        conn, namespace, expected=expected, applied_position=applied_position, now=now
    )
    return ns_id, version


def advance_at(
    conn: Connection,
    namespace: str,
    *,
    expected: int | None,
    applied_position: str | None,
    now: datetime | None,
) -> tuple[int, int, datetime]:
    """:func:`advance`, also returning the time it wrote: ``now``, or with ``now=None`` the
    database's clock (:mod:`worker.store.clock`).

    On PostgreSQL that clock is read by the fence statement itself (``now()``, the
    transaction's start: the value a ``SELECT now()`` first in the transaction returns), which
    saves the commit a round trip; SQLite's is read first (in-process, no round trip).
    """
    sql_now = now is None and conn.dialect.name == "postgresql"
    if not sql_now:
        now = resolve(conn, now)
    ns = Namespace.parse(namespace)
    if expected is not None and expected < 0:
        raise StoreRefused(f"expected_version must be >= 0, got {expected}")
    if expected == 0:
        # Version 0 means the namespace was never committed, so its row almost never exists:
        # insert first and save the UPDATE that would match nothing. If the row does exist
        # (or a concurrent first commit holds the key), nothing is inserted and the fenced
        # UPDATE below decides, exactly as before: it only matches a row still at version 0.
        first = _new_row(ns, namespace, applied_position, None if sql_now else now, 1)
        created = conn.execute(_first_commit(conn.dialect.name, sql_now), first).first()
        if created is not None:
            if erased_version(conn, namespace) is not None:
                raise _erased(namespace)  # read before an erase; the rollback undoes the insert
            return int(created.id), 1, created.updated_at
    stmt = _advance(expected is not None, applied_position is not None, sql_now)
    values = {"f_key": namespace, "f_expected": expected, "f_position": applied_position}
    row = conn.execute(stmt, values if sql_now else values | {"f_now": now}).first()
    if row is not None:
        return int(row.id), int(row.version), row.updated_at
    now = resolve(conn, now)
    ns_id, version = _recreate(
        conn, ns, namespace=namespace, expected=expected, applied_position=applied_position, now=now
    )
    return ns_id, version, now


def _recreate(
    conn: Connection,
    ns: Namespace,
    *,
    namespace: str,
    expected: int | None,
    applied_position: str | None,
    now: datetime,
) -> tuple[int, int]:
    """No row matched: the namespace's first write, or its first since an erase."""
    fence = erased_version(conn, namespace)
    if expected is not None and expected != fence:
        raise _erased(namespace) if fence is not None else _stale(namespace, expected)
    version = (fence or 0) + 1
    try:
        new_id = conn.execute(
            _INSERT_NAMESPACE, _new_row(ns, namespace, applied_position, now, version)
        ).scalar_one()
    except sa.exc.IntegrityError:
        # Another transaction created the namespace first.
        raise _stale(namespace, expected or 0) from None
    if fence is not None:
        conn.execute(
            sa.delete(namespace_fences).where(namespace_fences.c.digest == digest(namespace))
        )
    return int(new_id), version


#: The columns of a namespace's first row, each set from the parameter ``n_<column>``.
_NEW_ROW_COLUMNS: Final = (
    "key",
    "scope",
    "user_id",
    "assistant_id",
    "org_id",
    "version",
    "applied_position",
    "created_at",
    "updated_at",
)


def _new_row(
    ns: Namespace, namespace: str, applied_position: str | None, now: datetime | None, version: int
) -> dict[str, object]:
    """The parameters of a namespace's first row (version 1, or the erase fence plus one);
    ``now`` None: the statement reads the database's clock itself."""
    row: dict[str, object] = {
        "n_key": namespace,
        "n_scope": ns.scope.value,
        "n_user_id": ns.user_id,
        "n_assistant_id": ns.assistant_id,
        "n_org_id": ns.org_id,
        "n_version": version,
        "n_applied_position": applied_position,
    }
    if now is not None:
        row["n_created_at"] = row["n_updated_at"] = now
    return row


def _row_values(sql_now: bool) -> dict[str, Any]:
    values = {c: param(namespaces.c[c], "n_" + c) for c in _NEW_ROW_COLUMNS}
    if sql_now:
        values["created_at"] = values["updated_at"] = sa.func.now()
    return values


#: Built once (:mod:`worker.store.prebuilt`), as the statements below.
_INSERT_NAMESPACE: Final = (
    sa.insert(namespaces).values(_row_values(sql_now=False)).returning(namespaces.c.id)
)


@functools.cache
def _first_commit(dialect: str, sql_now: bool) -> Any:
    """Insert a namespace's first row unless its key exists (then nothing is returned)."""
    return (
        dialect_insert_for(dialect, namespaces)
        .values(_row_values(sql_now))
        .on_conflict_do_nothing(index_elements=[namespaces.c.key])
        .returning(namespaces.c.id, namespaces.c.updated_at)
    )


@functools.cache
def _advance(fenced: bool, position: bool, sql_now: bool) -> Any:
    """Bump a namespace's version (only from ``f_expected`` when ``fenced``)."""
    values: dict[str, Any] = {
        "version": namespaces.c.version + 1,
        "updated_at": sa.func.now() if sql_now else param(namespaces.c.updated_at, "f_now"),
    }
    if position:
        values["applied_position"] = param(namespaces.c.applied_position, "f_position")
    stmt = sa.update(namespaces).where(namespaces.c.key == param(namespaces.c.key, "f_key"))
    if fenced:
        stmt = stmt.where(namespaces.c.version == param(namespaces.c.version, "f_expected"))
    return stmt.values(values).returning(
        namespaces.c.id, namespaces.c.version, namespaces.c.updated_at
    )


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


def _erased(namespace: str) -> StaleVersion:
    return StaleVersion(
        f"namespace {namespace} was erased after this batch read it; nothing was written. Its "
        "candidates were erased with it, so there is nothing to retry"
    )


def take_for_erase(conn: Connection, keys: Sequence[str], *, now: datetime) -> int:
    """Record the erase fence of each of ``keys`` (in the erase's transaction, before its
    deletes); returns how many namespace rows this created only to take the lock.

    Each key first gets a placeholder row if it has none (``ON CONFLICT DO NOTHING``), which on
    PostgreSQL waits for an in-flight first commit of the same key; the row is then locked and
    its version read, so no commit can move it between this read and the erase's delete. The
    placeholder rows are deleted with the rest of the namespace. Each key's erase generation
    moves on by one (:func:`erase_generation`).
    """
    created = 0
    for key in keys:
        ns = Namespace.parse(key)
        placeholder = _new_row(ns, key, None, now, 0)
        created += (
            conn.execute(_first_commit(conn.dialect.name, False), placeholder).first() is not None
        )
        version = conn.execute(
            sa.select(namespaces.c.version).where(namespaces.c.key == key).with_for_update()
        ).scalar_one()
        fence = max(int(version), erased_version(conn, key) or 0) + 1
        conn.execute(sa.delete(namespace_fences).where(namespace_fences.c.digest == digest(key)))
        conn.execute(
            sa.insert(namespace_fences).values(digest=digest(key), version=fence, erased_at=now)
        )
        _bump_generation(conn, key)
    return created


def recent_positions(conn: Connection, limit: int) -> list[tuple[str, str]]:
    """``(namespace, applied position)`` of the ``limit`` most recently committed namespaces."""
    rows = conn.execute(
        sa.select(namespaces.c.key, namespaces.c.applied_position)
        .where(namespaces.c.applied_position.is_not(None))
        .order_by(namespaces.c.updated_at.desc())
        .limit(limit)
    ).all()
    return [(str(r.key), str(r.applied_position)) for r in rows]
