"""Everything a consolidation reads before it merges, in one read transaction, and the
readers of a namespace's state it is made of (also used alone: ``MemoryStore.load_state``).

A batch needs the namespace state (active entries, version, applied position, read-only
paths), the current content of its files, and which of its candidates the ledger already
holds. Read separately, that was three transactions (each a pool checkout, ``BEGIN`` and
``COMMIT``) and six statements, two of them looking up the same namespace row again. Here it
is one transaction: the namespace row once, then entries, files (with their read-only flag, so
read-only paths need no query of their own) and the ledger by row id.

Nothing here is a correctness guarantee: the commit is still fenced by the version read here
and by the unique ledger, so a snapshot that is stale by the time of the commit only makes the
commit fail with :class:`~worker.errors.StaleVersion`.

The database's clock can be read in the same transaction (``read_clock``): a batch's start
time then costs one statement, not a transaction of its own (three round trips on
PostgreSQL: ``BEGIN``, the query, ``COMMIT``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.models import Namespace
from worker.store import fence
from worker.store.clock import clock_column, clock_value
from worker.store.fence import digest
from worker.store.files import with_current_version
from worker.store.prebuilt import param
from worker.store.schema import (
    candidate_ledger,
    entries,
    file_versions,
    memory_files,
    namespace_fences,
    namespaces,
)
from worker.values import Entry, NamespaceState

#: Ids per ``IN (…)`` list: far below SQLite's 32766 bound-parameter limit, and large enough
#: that a 10 000-candidate batch needs ten round trips at most.
IN_CHUNK: Final = 1000


def load_state(conn: Connection, namespace: str) -> NamespaceState:
    """The active entries, version and applied position of ``namespace`` (version 0 if new,
    the erase fence if it was erased)."""
    Namespace.parse(namespace)
    row = namespace_row(conn, namespace)
    if row is None:
        return empty_state(conn, namespace)
    read_only = conn.execute(
        sa.select(memory_files.c.path).where(
            memory_files.c.namespace_id == row.id, memory_files.c.operator_owned.is_(True)
        )
    ).scalars()
    return state_from_rows(namespace, row, active_entries(conn, row.id), read_only)


def empty_state(conn: Connection, namespace: str) -> NamespaceState:
    """The state of a namespace with no row: never committed (version 0), or erased (its
    fence, so a commit that read it before the erase is told apart from one after)."""
    version = fence.erased_version(conn, namespace) or 0
    return NamespaceState(namespace=namespace, version=version, applied_position=None)


def namespace_row(conn: Connection, namespace: str) -> Any:
    """``(id, version, applied_position)`` of ``namespace``, or None when never committed."""
    return conn.execute(
        sa.select(namespaces.c.id, namespaces.c.version, namespaces.c.applied_position).where(
            namespaces.c.key == namespace
        )
    ).first()


def active_entries(conn: Connection, ns_id: int) -> list[Entry]:
    """The active entries of a namespace row, oldest first (the order consolidators see)."""
    rows = conn.execute(
        sa.select(entries)
        .where(entries.c.namespace_id == ns_id, entries.c.invalid_at.is_(None))
        .order_by(entries.c.created_at, entries.c.id)
    )
    return [entry_from_row(r) for r in rows]


def state_from_rows(
    namespace: str, row: Any, active: Iterable[Entry], read_only: Iterable[str]
) -> NamespaceState:
    return NamespaceState(
        namespace=namespace,
        version=int(row.version),
        applied_position=row.applied_position,
        entries=tuple(active),
        read_only_paths=frozenset(read_only),
    )


def entry_from_row(r: Any) -> Entry:
    # Rows come from our own writes; skipping pydantic validation keeps loading big namespaces
    # cheap.
    return Entry.model_construct(
        id=r.id,
        path=r.path,
        text=r.text,
        key=r.key,
        valid_from=r.valid_from,
        invalid_at=r.invalid_at,
        invalid_reason=r.invalid_reason,
        superseded_by=r.superseded_by,
        confirmations=r.confirmations,
        candidate_ids=tuple(r.candidate_ids),
        trace_ids=tuple(r.trace_ids),
        created_at=r.created_at,
        last_confirmed_at=r.last_confirmed_at,
    )


def current_files(conn: Connection, namespace: str) -> dict[str, str]:
    """Path → content of the current version of every file of ``namespace``."""
    stmt = (
        sa.select(memory_files.c.path, file_versions.c.content)
        .select_from(with_current_version())
        .join(namespaces, namespaces.c.id == memory_files.c.namespace_id)
        .where(namespaces.c.key == namespace)
        .order_by(memory_files.c.path)
    )
    return {row.path: row.content for row in conn.execute(stmt)}


def already_recorded(conn: Connection, namespace: str, candidate_ids: Iterable[str]) -> set[str]:
    """The subset of ``candidate_ids`` that the ledger of ``namespace`` already holds."""
    ids = list(dict.fromkeys(candidate_ids))
    ns_id = fence.namespace_id(conn, namespace) if ids else None
    if ns_id is None:
        return set()
    return ledger_hits(conn, ns_id, ids)


def ledger_hits(conn: Connection, ns_id: int, candidate_ids: Iterable[str]) -> set[str]:
    """The subset of ``candidate_ids`` in the ledger of a namespace row."""
    ids = list(dict.fromkeys(candidate_ids))
    found: set[str] = set()
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        found.update(
            conn.execute(
                sa.select(candidate_ledger.c.candidate_id).where(
                    candidate_ledger.c.namespace_id == ns_id,
                    candidate_ledger.c.candidate_id.in_(chunk),
                )
            ).scalars()
        )
    return found


@dataclass(frozen=True)
class BatchSnapshot:
    """What :meth:`MemoryStore.snapshot` read: the inputs of one merge."""

    state: NamespaceState
    #: Path → content of the current version of every file of the namespace.
    current_files: dict[str, str] = field(default_factory=dict)
    #: The asked-for candidate ids that the namespace's ledger already holds.
    recorded: frozenset[str] = frozenset()
    #: The database's clock at the start of the read (None unless asked for).
    now: datetime | None = None


def _head(conn: Connection, namespace: str, *, read_clock: bool) -> Any:
    """One row, in one statement: the namespace row's ``id``, ``version`` and
    ``applied_position`` (all None when it has none), its erase fence ``erased`` (None: not
    erased) and, when ``read_clock``, the database's clock ``now``. Read apart, that is up to
    three statements (three round trips on PostgreSQL) for a namespace's first batch."""
    stmt = _head_statement(conn.dialect.name, read_clock)
    return conn.execute(stmt, {"s_key": namespace, "s_digest": digest(namespace)}).one()


@functools.cache
def _head_statement(dialect: str, read_clock: bool) -> sa.Select[Any]:
    """:func:`_head`'s statement, built once per dialect (:mod:`worker.store.prebuilt`)."""
    one = sa.select(sa.literal(1).label("one")).subquery()
    erased = (
        sa.select(namespace_fences.c.version)
        .where(namespace_fences.c.digest == param(namespace_fences.c.digest, "s_digest"))
        .scalar_subquery()
    )
    columns: list[sa.ColumnElement[Any]] = [
        namespaces.c.id,
        namespaces.c.version,
        namespaces.c.applied_position,
        erased.label("erased"),
    ]
    if read_clock:
        columns.append(clock_column(dialect).label("now"))
    joined = one.outerjoin(namespaces, namespaces.c.key == param(namespaces.c.key, "s_key"))
    return sa.select(*columns).select_from(joined)


def read_snapshot(
    conn: Connection, namespace: str, candidate_ids: Iterable[str], *, read_clock: bool = False
) -> BatchSnapshot:
    """State, current files and ledger hits of ``namespace`` (empty when it is new), and the
    database's clock when ``read_clock``."""
    Namespace.parse(namespace)
    row = _head(conn, namespace, read_clock=read_clock)
    now = clock_value(row.now) if read_clock else None
    if row.id is None:
        # Never committed (version 0), or erased (its fence): as empty_state reads it.
        state = NamespaceState(
            namespace=namespace, version=int(row.erased or 0), applied_position=None
        )
        return BatchSnapshot(state, now=now)
    ns_id = int(row.id)
    active = active_entries(conn, ns_id)
    files: dict[str, str] = {}
    read_only: list[str] = []
    # An outer join: a file is read-only by its flag even in the (impossible by construction)
    # case of a missing current version, exactly as the separate queries read it.
    stmt = (
        sa.select(memory_files.c.path, memory_files.c.operator_owned, file_versions.c.content)
        .select_from(with_current_version(outer=True))
        .where(memory_files.c.namespace_id == ns_id)
        .order_by(memory_files.c.path)
    )
    for path, operator_owned, content in conn.execute(stmt):
        if content is not None:
            files[path] = content
        if operator_owned:
            read_only.append(path)
    ids = list(candidate_ids)
    recorded = ledger_hits(conn, ns_id, ids) if ids else set()
    return BatchSnapshot(
        state=state_from_rows(namespace, row, active, read_only),
        current_files=files,
        recorded=frozenset(recorded),
        now=now,
    )
