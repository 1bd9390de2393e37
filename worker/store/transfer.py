"""A namespace as a document, and its erasure: export, import and erase.

An export holds the files with their full history, the entries, the ledger and pending
approvals. An import validates the whole document first, then writes it in one transaction
into a namespace that has no memory yet; the applied log position is not carried over (it is a
position in the exporting deployment's queue).

An erase deletes every SQL row that holds or names the namespaces' memories. Sinks still hold
copies, so for each file that existed an ``erase`` tombstone is queued per sink (the sinks that
ever received the namespace, plus any named). A delivered tombstone is deleted, after which
nothing of the namespace remains but its erase fence (see :mod:`worker.store.commit`), which
makes any commit that read the namespace before the erase fail as stale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal

import sqlalchemy as sa
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.engine import Connection

from worker.errors import ErasedNamespace, InvalidCandidate, NotFound, StoreRefused
from worker.models import Namespace, normalise_path
from worker.store import commit as _commit
from worker.store import search as _search
from worker.store.commit import insert_run, queue_publish
from worker.store.engine import resolve
from worker.store.outbox import in_doubt
from worker.store.records import CommitResult, EraseReport, RunRecord
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
from worker.types import refuse_reserved, require_utc

#: Format tag of export documents; bump it when the document's shape changes.
EXPORT_FORMAT: Final = "memworker.namespace.v1"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VersionDoc(_Doc):
    version: int = Field(ge=1)
    namespace_version: int = Field(ge=1)
    content: str
    diff: str
    author: str = Field(min_length=1, max_length=200)
    created_at: AwareDatetime


class FileDoc(_Doc):
    path: str
    operator_owned: bool = False
    created_at: AwareDatetime
    versions: list[VersionDoc] = Field(min_length=1)


class EntryDoc(_Doc):
    id: str = Field(min_length=1, max_length=128)
    path: str
    text: str
    key: str | None = None
    valid_from: AwareDatetime
    invalid_at: AwareDatetime | None = None
    invalid_reason: str | None = None
    superseded_by: str | None = None
    confirmations: int = Field(ge=0)
    candidate_ids: list[str]
    trace_ids: list[str]
    created_at: AwareDatetime
    last_confirmed_at: AwareDatetime
    added_version: int = Field(ge=1)
    invalidated_version: int | None = None


class LedgerDoc(_Doc):
    candidate_id: str = Field(min_length=1, max_length=128)
    trace_id: str = Field(min_length=1, max_length=128)
    outcome: Literal["merged", "duplicate", "forgotten", "rejected", "pending_approval"]
    reason: str | None = None
    entry_id: str | None = None
    created_at: AwareDatetime
    # Provenance (schema 0008): absent from older exports, kept through an export and import.
    source: str | None = Field(default=None, max_length=32)
    thread_id: str | None = Field(default=None, max_length=128)
    said_at: AwareDatetime | None = None
    operation: Literal["add", "supersede", "confirm", "invalidate", "reject"] | None = None
    revision: int | None = Field(default=None, ge=1)


class ApprovalDoc(_Doc):
    path: str
    operation: dict[str, Any]
    candidate_ids: list[str]
    created_at: AwareDatetime


class NamespaceDoc(_Doc):
    format: Literal["memworker.namespace.v1"]
    namespace: str
    version: int = Field(ge=1)
    files: list[FileDoc]
    entries: list[EntryDoc]
    ledger: list[LedgerDoc]
    approvals: list[ApprovalDoc] = Field(default_factory=list)


def export_namespace(conn: Connection, namespace: str) -> dict[str, Any]:
    """The namespace as a JSON-able dict (datetimes as ISO 8601 strings)."""
    ns = conn.execute(sa.select(namespaces).where(namespaces.c.key == namespace)).first()
    if ns is None:
        raise NotFound(f"{namespace} has no memory to export")
    files = []
    for f in conn.execute(
        sa.select(memory_files)
        .where(memory_files.c.namespace_id == ns.id)
        .order_by(memory_files.c.path)
    ):
        versions = conn.execute(
            sa.select(file_versions)
            .where(file_versions.c.file_id == f.id)
            .order_by(file_versions.c.version)
        )
        files.append(
            {
                "path": f.path,
                "operator_owned": bool(f.operator_owned),
                "created_at": f.created_at,
                "versions": [{k: getattr(v, k) for k in VersionDoc.model_fields} for v in versions],
            }
        )
    doc = {
        "format": EXPORT_FORMAT,
        "namespace": namespace,
        "version": ns.version,
        "files": files,
        "entries": [
            {k: getattr(e, k) for k in EntryDoc.model_fields}
            for e in conn.execute(
                sa.select(entries)
                .where(entries.c.namespace_id == ns.id)
                .order_by(entries.c.created_at, entries.c.id)
            )
        ],
        "ledger": [
            {k: getattr(r, k) for k in LedgerDoc.model_fields}
            for r in conn.execute(
                sa.select(candidate_ledger)
                .where(candidate_ledger.c.namespace_id == ns.id)
                .order_by(candidate_ledger.c.id)
            )
        ],
        "approvals": [
            {k: getattr(a, k) for k in ApprovalDoc.model_fields}
            for a in conn.execute(
                sa.select(approvals)
                .where(approvals.c.namespace_id == ns.id, approvals.c.status == "pending")
                .order_by(approvals.c.id)
            )
        ],
    }
    # One validation pass doubles as the JSON rendering (datetimes → ISO strings).
    return NamespaceDoc.model_validate(doc).model_dump(mode="json")


def parse_document(data: Mapping[str, Any]) -> NamespaceDoc:
    """Validate an export document; :class:`StoreError` lists every problem."""
    try:
        doc = NamespaceDoc.model_validate(dict(data))
    except ValidationError as exc:
        found = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:20]
        )
        raise StoreRefused(
            f"the import document is invalid (nothing was written): {found}"
        ) from None
    paths = [f.path for f in doc.files]
    problems = [f"file {p} appears twice" for p in sorted({p for p in paths if paths.count(p) > 1})]
    for f in doc.files:
        numbers = [v.version for v in f.versions]
        if numbers != list(range(1, len(numbers) + 1)):
            problems.append(f"file {f.path} versions are {numbers}, not 1..{len(numbers)}")
    for p in dict.fromkeys([*paths, *(e.path for e in doc.entries),
                            *(a.path for a in doc.approvals)]):  # fmt: skip
        try:
            if normalise_path(p) != p:
                problems.append(f"path {p} is not normalised (expected {normalise_path(p)})")
            refuse_reserved(p, f"path {p}")
        except InvalidCandidate as exc:
            problems.append(str(exc))
    ids = [e.id for e in doc.entries]
    problems += [f"entry {i} appears twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    candidates = [r.candidate_id for r in doc.ledger]
    problems += [
        f"candidate {c} appears twice in the ledger"
        for c in sorted({c for c in candidates if candidates.count(c) > 1})
    ]
    if problems:
        raise StoreRefused(
            "the import document is invalid (nothing was written): " + "; ".join(problems)
        )
    return doc


def import_namespace(
    conn: Connection,
    doc: NamespaceDoc,
    *,
    namespace: str | None,
    sinks: Sequence[str],
    now: datetime,
    restore_erased: bool = False,
) -> CommitResult:
    """Write ``doc`` into ``namespace`` (default: the document's), which must have no memory.

    Erase is final for import too: when the target namespace, or the one the document was
    exported from, was ever erased here (its erase generation, which outlives the user's
    return, is above 0), the import is refused with :class:`ErasedNamespace` unless
    ``restore_erased``. An export taken before a ``forget`` would otherwise bring the user
    back, pending approvals included, without a word.
    """
    now = require_utc(now, "now")
    key = namespace or doc.namespace
    Namespace.parse(key)
    if _commit.namespace_id(conn, key) is not None:
        raise StoreRefused(
            f"{key} already has memory; erase it first (`memworker forget`, then import with "
            "--restore-erased) or import into another namespace"
        )
    was_erased = erased_namespaces(conn, key, doc.namespace)
    if was_erased and not restore_erased:
        raise ErasedNamespace(
            f"{describe_erased(was_erased)}: erase is final, so nothing was imported. To bring "
            "it back on purpose, import again with --restore-erased (restore_erased=True)"
        )
    # An erased namespace keeps its fence: the import starts above it, so a commit that read
    # the namespace before the erase still fails as stale.
    erased = _commit.erased_version(conn, key)
    ns_id, floor = _commit.advance(conn, key, expected=erased or 0, applied_position=None, now=now)
    version = doc.version if erased is None else max(doc.version, floor)
    conn.execute(sa.update(namespaces).where(namespaces.c.id == ns_id).values(version=version))
    run_id = insert_run(
        conn,
        RunRecord(
            trigger="import",
            namespace=key,
            started_at=now,
            finished_at=now,
            outcome="ok",
            candidates=len(doc.ledger),
            counts={"files": len(doc.files), "entries": len(doc.entries)},
        ),
    )
    published, written = _import_files(conn, ns_id, doc)
    if doc.entries:
        conn.execute(
            sa.insert(entries), [{"namespace_id": ns_id, **e.model_dump()} for e in doc.entries]
        )
        _search.sync_namespace(conn, ns_id)
    if doc.ledger:
        conn.execute(
            sa.insert(candidate_ledger),
            [{"namespace_id": ns_id, "run_id": run_id, **r.model_dump()} for r in doc.ledger],
        )
    if doc.approvals:
        conn.execute(
            sa.insert(approvals),
            [
                {"namespace_id": ns_id, "status": "pending", "run_id": run_id, **a.model_dump()}
                for a in doc.approvals
            ],
        )
    outbox_ids = queue_publish(
        conn, namespace=key, items=published, sinks=list(dict.fromkeys(sinks)), now=now
    )
    return CommitResult(
        version=version, run_id=run_id, files=tuple(written), outbox_ids=tuple(outbox_ids)
    )


def erased_namespaces(conn: Connection, *keys: str) -> dict[str, int]:
    """Each of ``keys`` that was ever erased here, with how many times."""
    return {k: g for k, g in _commit.generations(conn, list(dict.fromkeys(keys))).items() if g}


def describe_erased(erased: Mapping[str, int]) -> str:
    """``erased`` for a message, e.g. ``user:u1 was erased (1 time)``.

    >>> describe_erased({"user:u1": 1, "user:u2": 2})
    'user:u1 was erased (1 time) and user:u2 was erased (2 times)'
    """
    return " and ".join(
        f"{k} was erased ({n} time{'s' if n != 1 else ''})" for k, n in sorted(erased.items())
    )


def _import_files(
    conn: Connection, ns_id: int, doc: NamespaceDoc
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """Insert the document's files with all their versions: ``(path, newest version id)`` to
    publish, and ``(path, versions written)``."""
    published: list[tuple[str, int]] = []
    written: list[tuple[str, int]] = []
    for f in doc.files:
        file_id = conn.execute(
            sa.insert(memory_files)
            .values(
                namespace_id=ns_id,
                path=f.path,
                current_version=len(f.versions),
                operator_owned=f.operator_owned,
                created_at=f.created_at,
                modified_at=f.versions[-1].created_at,
            )
            .returning(memory_files.c.id)
        ).scalar_one()
        ids = (
            conn.execute(
                sa.insert(file_versions).returning(
                    file_versions.c.id, sort_by_parameter_order=True
                ),
                [{"file_id": file_id, "run_id": None, **v.model_dump()} for v in f.versions],
            )
            .scalars()
            .all()
        )
        published.append((f.path, int(ids[-1])))
        written.append((f.path, len(f.versions)))
    return published, written


def erase_namespaces(
    conn: Connection, keys: Sequence[str], *, sinks: Sequence[str], now: datetime | None
) -> EraseReport:
    """Delete everything of ``keys``; queue tombstones (due at ``now``: the database's clock
    when None); report rows deleted per table."""
    now = resolve(conn, now)
    keys = sorted(set(keys))
    placeholders = _commit.take_for_erase(conn, keys, now=now)
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
    _search.drop_namespaces(conn, ns_ids)
    _search.drop_namespace_vectors(conn, ns_ids)
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
