"""A namespace's state and its fenced commit: the snapshot a merge reads, the fence, file versions
and runs.

**The fence.** Every write to a namespace moves its version by exactly one: a commit bumps with
``UPDATE … SET version = expected + 1 WHERE key = … AND version = expected``, so of two commits
that read the same version exactly one matches a row (PostgreSQL: the loser waits on the row
lock; SQLite: ``BEGIN IMMEDIATE`` serialises writers). A first commit inserts the row instead,
and the unique key turns a concurrent first commit into :class:`StaleVersion` the same way.

**Erase takes the fence.** Erasing deletes the namespace row but records its version plus one
under :func:`digest` of the key. A commit that read the namespace before the erase carries an
older version and is refused as stale, even as a first commit: that path looks for the fence
*after* its insert, so either the erase sees the committed row or the commit sees the committed
fence. A state read after the erase reports the fence as its version (:func:`erased_version`),
and its commit recreates the row from there.

**File versions** are append-only: every change is a new ``file_versions`` row numbered
``current_version + 1``, with one outbox row per sink in the same transaction, so a sink only
ever sees committed versions.

**The snapshot** (:func:`read_snapshot`) is everything a merge reads, in one transaction. It
guarantees nothing: a snapshot stale by the time of the commit only makes the commit fail with
:class:`~worker.errors.StaleVersion`.

**The commit** (:func:`commit_batch`) is the pipeline's only write: fence, entries, file
versions, ledger, applied log position, approvals, the run row and the outbox rows all land or
none do. A batch whose candidates are already in the ledger (a redelivery) raises
:class:`StaleVersion` like a lost race: either way the caller acknowledges nothing new.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import InvalidPlan, StaleVersion, StoreRefused
from worker.models import AppliedPlan, Entry, Namespace, NamespaceState, PendingApproval
from worker.store import search as _search
from worker.store.engine import (
    clock_column,
    clock_value,
    dialect_insert,
    dialect_insert_for,
    param,
    resolve,
)
from worker.store.records import CONSOLIDATOR_AUTHOR, RUN_TRIGGERS, CommitResult, RunInfo, RunRecord
from worker.store.schema import (
    approvals,
    candidate_ledger,
    entries,
    erase_generations,
    file_versions,
    memory_files,
    namespace_fences,
    namespaces,
    outbox,
    runs,
)
from worker.types import RUN_OUTCOMES, require_utc


def digest(namespace: str) -> str:
    """The key an erased namespace's fence is stored under: never the namespace key itself.

    >>> len(digest("user:u1")), digest("user:u1") == digest("user:u1")
    (64, True)
    """
    return hashlib.sha256(f"memworker-fence:{namespace}".encode()).hexdigest()


#: Built once (:mod:`worker.store.engine`): every batch and every delivery reads these.
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
    database's clock (:mod:`worker.store.engine`).

    On PostgreSQL the fence statement reads that clock itself (``now()``, the transaction's
    start), saving a round trip; SQLite's is read first (in-process).
    """
    sql_now = now is None and conn.dialect.name == "postgresql"
    if not sql_now:
        now = resolve(conn, now)
    ns = Namespace.parse(namespace)
    if expected is not None and expected < 0:
        raise StoreRefused(f"expected_version must be >= 0, got {expected}")
    if expected == 0:
        # Version 0: the row almost never exists, so insert first (no UPDATE matching nothing).
        # If it does exist, or a concurrent first commit holds the key, nothing is inserted and
        # the fenced UPDATE below decides: it only matches a row still at version 0.
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


#: Built once (:mod:`worker.store.engine`), as the statements below.
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
    """:func:`_advance_files`'s upsert, built once per dialect (:mod:`worker.store.engine`)
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


#: Ids per ``IN (…)`` list: far below SQLite's 32766 bound-parameter limit, yet few round trips
#: for a large batch.
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
    version = erased_version(conn, namespace) or 0
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
    # Rows come from our own writes: skipping validation keeps loading big namespaces cheap.
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
    ns_id = namespace_id(conn, namespace) if ids else None
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
    erased) and, when ``read_clock``, the database's clock ``now``."""
    stmt = _head_statement(conn.dialect.name, read_clock)
    return conn.execute(stmt, {"s_key": namespace, "s_digest": digest(namespace)}).one()


@functools.cache
def _head_statement(dialect: str, read_clock: bool) -> sa.Select[Any]:
    """:func:`_head`'s statement, built once per dialect (:mod:`worker.store.engine`)."""
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
        # Never committed (version 0), or erased (its fence), as in :func:`empty_state`.
        state = NamespaceState(
            namespace=namespace, version=int(row.erased or 0), applied_position=None
        )
        return BatchSnapshot(state, now=now)
    ns_id = int(row.id)
    active = active_entries(conn, ns_id)
    files: dict[str, str] = {}
    read_only: list[str] = []
    # Outer join: a file is read-only by its flag even without a current version.
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


#: Built once (:mod:`worker.store.engine`): every batch writes a run; values come as parameters.
_INSERT_RUN: Final = sa.insert(runs).returning(runs.c.id)


def insert_run(conn: Connection, run: RunRecord, *, namespace: str | None = None) -> int:
    """Write ``run`` (``namespace`` overrides the record's) and return its id."""
    if run.trigger not in RUN_TRIGGERS:
        raise StoreRefused(
            f"run trigger {run.trigger!r} is not one of {', '.join(sorted(RUN_TRIGGERS))}"
        )
    if run.outcome not in RUN_OUTCOMES:
        raise StoreRefused(
            f"run outcome {run.outcome!r} is not one of {', '.join(sorted(RUN_OUTCOMES))}"
        )
    window = run.window
    row: dict[str, Any] = {
        "trigger": run.trigger,
        "namespace": namespace if namespace is not None else run.namespace,
        "schedule": run.schedule,
        "tick": run.tick,
        "window_start": window[0] if window else None,
        "window_end": window[1] if window else None,
        "started_at": require_utc(run.started_at, "run.started_at"),
        "finished_at": run.finished_at,
        "outcome": run.outcome,
        "error": run.error,
        "candidates": run.candidates,
        "counts": dict(run.counts),
        "llm_calls": run.llm_calls,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
    }
    return int(conn.execute(_INSERT_RUN, row).scalar_one())


def list_runs(conn: Connection, *, namespace: str | None, limit: int) -> list[RunInfo]:
    """The newest ``limit`` runs, of one namespace or of all."""
    stmt = sa.select(runs).order_by(runs.c.id.desc()).limit(limit)
    if namespace is not None:
        stmt = stmt.where(runs.c.namespace == namespace)
    return [
        RunInfo(
            id=int(r.id),
            trigger=r.trigger,
            namespace=r.namespace,
            schedule=r.schedule,
            tick=r.tick,
            window=(r.window_start, r.window_end) if r.window_start and r.window_end else None,
            started_at=r.started_at,
            finished_at=r.finished_at,
            outcome=r.outcome,
            error=r.error,
            candidates=r.candidates,
            counts=dict(r.counts),
            llm_calls=r.llm_calls,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
        )
        for r in conn.execute(stmt)
    ]


def count_runs(conn: Connection, *, outcome: str, since: datetime) -> int:
    """How many runs with ``outcome`` started at or after ``since``."""
    since = require_utc(since, "since")
    stmt = sa.select(sa.func.count()).where(runs.c.outcome == outcome, runs.c.started_at >= since)
    return int(conn.execute(stmt).scalar_one())


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
    ns_id, version, now = advance_at(
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
    _search.sync_written(conn, ns_id, new=applied.new_entries, changed=applied.changed_entries)
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
    """Insert a batch's ``rows`` (dicts with the same keys) in one ``executemany``: one round
    trip on both databases.

    On PostgreSQL psycopg pipelines it to a statement prepared once per connection. Not a
    multi-row ``INSERT … VALUES (…), (…)`` (what an ``INSERT … RETURNING`` executemany
    becomes): its text grows with the rows, so the client re-parses and the server re-plans it
    for every batch. SQLite runs ``executemany`` in C over one prepared statement.
    """
    if rows:
        conn.execute(sa.insert(table), list(rows))
