"""The memory store's facade (:class:`MemoryStore`) and its small repositories: search, approvals,
progress, health.

Each method is one transaction; the repositories are mixins of :class:`MemoryStore`, kept apart
so each concern stays one screen. Methods that stamp or compare times other processes read
(outbox retries and claims, sink breakers, erase tombstones) take ``now=None`` for the
database's clock (:mod:`worker.store.engine`); a timezone-aware ``now`` is a test's injected
time. Nothing here reads the host's clock or the environment.

>>> from datetime import UTC, datetime
>>> from worker.models import AppliedPlan, Entry, FileChange, LedgerRow
>>> store = MemoryStore.from_url("sqlite://", create=True)
>>> now = datetime(2025, 1, 1, tzinfo=UTC)
>>> state = store.load_state("user:u1")
>>> state.version
0
>>> entry = Entry(id="e1", path="/memories/facts.md", text="Likes tea", valid_from=now,
...               created_at=now, last_confirmed_at=now, candidate_ids=("c1",))
>>> applied = AppliedPlan(
...     new_entries=(entry,), changed_entries=(),
...     files=(FileChange("/memories/facts.md", "- Likes tea\\n", "+- Likes tea\\n", None),),
...     ledger=(LedgerRow("c1", "t1", "merged", entry_id="e1"),))
>>> result = store.commit_batch(namespace="user:u1", expected_version=state.version,
...     applied_position="1-0", applied=applied, sinks=["files"], now=now,
...     run=RunRecord(trigger="queue", namespace="user:u1", started_at=now, outcome="ok"))
>>> result.version, result.files
(1, (('/memories/facts.md', 1),))
>>> store.current_files("user:u1")
{'/memories/facts.md': '- Likes tea\\n'}
>>> store.dispose()

**Approvals** are changes to read-only or sensitive paths, waiting for an operator.
:func:`decide` only records the decision; :func:`apply_approved` decides *and* commits the
waiting operation in the caller's transaction, fenced like a merge, so an approval is never
marked approved without its change, nor applied twice. How the operation becomes file content is
the ``build`` callback's business (the store runs no consolidation logic).

**Progress** only ever moves forward. A source cursor records how far a source (e.g. the thread
scan) got, per key. A tick row is unique per (schedule, tick): the first ``try_start_tick``
wins, later beats of the same tick get False; a failed tick may be started again, and so may one
left ``running`` longer than ``stale_after`` (its process died). The watermark, the end of the
last successful window, never goes back.

**Health**: :class:`StoreHealth` answers ``memworker status``'s reads (ticks, watermarks, sink
lag and breakers, failed runs, recent positions) exactly as ``MemoryStore``'s methods of the same
names do, without importing the store's write side (commit, search, erase, transfer).

>>> from datetime import UTC, datetime
>>> health = StoreHealth.from_url("sqlite://", create=True)
>>> health.count_runs(outcome="failed", since=datetime(2025, 1, 1, tzinfo=UTC))
0
>>> health.dispose()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import NotFound
from worker.models import AppliedPlan, Entry, Namespace, NamespaceState
from worker.store import commit as _commit
from worker.store import history as _history
from worker.store import outbox as _outbox
from worker.store import schema as _schema
from worker.store import search as _search
from worker.store import transfer as _transfer
from worker.store.commit import BatchSnapshot, entry_from_row
from worker.store.engine import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
    Transactions,
    dialect_insert,
    open_engine,
)
from worker.store.outbox import DeliveryMethods
from worker.store.records import (
    ROLLBACK_AUTHOR,
    ApprovalInfo,
    CommitResult,
    EntryProvenance,
    EraseReport,
    FileInfo,
    FileVersionInfo,
    LedgerInfo,
    RunInfo,
    RunRecord,
    SinkHealth,
    SinkLag,
    TickInfo,
)
from worker.store.schema import (
    approvals,
    candidate_ledger,
    entries,
    namespaces,
    schedule_ticks,
    schedule_watermarks,
    source_cursors,
)
from worker.store.search import Embedded, PendingText
from worker.store.search_text import query_terms
from worker.types import require_utc

__all__ = ["BatchSnapshot", "CommitResult", "MemoryStore", "RunRecord"]


T = TypeVar("T")


@dataclass(frozen=True)
class NamespaceVectors:
    """The vectors of a namespace's active entries from one model (rows of ``vectors``)."""

    entry_ids: list[str]
    vectors: list[bytes]
    dim: int
    #: Changes whenever the namespace's vectors may have (see :meth:`vectors_fingerprint`).
    fingerprint: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class SearchRead:
    """What :meth:`SearchMethods.search_and_read` read in one snapshot: the namespace's
    vector fingerprint, the full-text ids best first, and the active entries among those
    its ``choose`` picked (None when it picked none)."""

    fingerprint: tuple[int, int]
    entry_ids: list[str]
    entries: list[Entry] | None


class SearchMethods:
    """Search over the store (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    def _snapshot_read(self, what: str, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    def _write(self, what: str, fn: Callable[[Connection], T]) -> T:
        raise NotImplementedError

    def search_entries(self, namespace: str, query: str, *, limit: int) -> list[Entry]:
        """The best ``limit`` active entries of ``namespace`` for ``query`` (full-text, BM25),
        best first. Any text is a valid query: it is cut into terms, never read as syntax."""
        Namespace.parse(namespace)
        terms = query_terms(query)

        def run(conn: Connection) -> list[Entry]:
            at = _search.head(conn, namespace)
            if at is None or not terms:
                return []
            ranked = [i for i, _ in _search.search(conn, at, terms, limit)]
            return _active(conn, at.ns_id, ranked)

        return self._snapshot_read("searching " + namespace, run)

    def search_and_read(
        self,
        namespace: str,
        query: str,
        *,
        limit: int,
        choose: Callable[[tuple[int, int], list[str]], Sequence[str] | None],
    ) -> SearchRead:
        """:meth:`vectors_fingerprint` and the ids of :meth:`search_entries`' entries, best
        first; then the active entries of ``namespace`` among the ids ``choose(fingerprint,
        ids)`` returns, in its order (None: none are read). All in one snapshot, so a hybrid
        search can rank in ``choose`` (when its kept vectors are of this fingerprint) and get
        back entries checked active where they were ranked. ``choose`` runs inside the
        transaction: it must be quick and must not use the store."""
        Namespace.parse(namespace)
        terms = query_terms(query)

        def run(conn: Connection) -> SearchRead:
            at = _search.head(conn, namespace)
            if at is None:
                chosen = choose((0, 0), [])
                return SearchRead((0, 0), [], None if chosen is None else [])
            found = _search.search(conn, at, terms, limit) if terms else []
            ids = [i for i, _ in found]
            chosen = choose(at.fingerprint, ids)
            read = None if chosen is None else _active(conn, at.ns_id, chosen)
            return SearchRead(at.fingerprint, ids, read)

        return self._snapshot_read("searching " + namespace, run)

    def entries_by_id(self, namespace: str, entry_ids: Sequence[str]) -> list[Entry]:
        """The active entries of ``namespace`` among ``entry_ids``, in the order given."""
        ids = list(entry_ids)

        def run(conn: Connection) -> list[Entry]:
            ns_id = _commit.namespace_id(conn, namespace)
            return [] if ns_id is None else _active(conn, ns_id, ids)

        return self._read("reading entries", run)

    def pending_embeddings(self, namespace: str, model: str, *, limit: int) -> list[PendingText]:
        """Active entries of ``namespace`` with no vector from ``model`` yet."""

        def run(conn: Connection) -> list[PendingText]:
            ns_id = _commit.namespace_id(conn, namespace)
            return [] if ns_id is None else _search.pending(conn, ns_id, model, limit)

        return self._read("finding entries to embed", run)

    def store_embeddings(
        self, namespace: str, model: str, items: Sequence[Embedded], *, now: datetime
    ) -> int:
        """Store vectors of entries still active with the text embedded; how many were."""

        def run(conn: Connection) -> int:
            ns_id = _commit.namespace_id(conn, namespace)
            if ns_id is None or not items:
                return 0
            return _search.store(conn, ns_id, model, items, now=now)

        return self._write("storing vectors", run)

    def namespace_vectors(self, namespace: str, model: str) -> NamespaceVectors:
        """The vectors from ``model`` of the active entries of ``namespace``."""

        def run(conn: Connection) -> NamespaceVectors:
            at = _search.head(conn, namespace)
            if at is None:
                return NamespaceVectors([], [], 0)
            vectors = _search.active_vectors(conn, at.ns_id, model)
            return NamespaceVectors(*vectors, at.fingerprint)

        return self._snapshot_read("reading vectors", run)

    def vectors_fingerprint(self, namespace: str, model: str) -> tuple[int, int]:
        """A value that changes whenever the vectors :meth:`namespace_vectors` would return
        may have (the namespace's version and vector counter): one indexed read, so a caller
        can keep the matrix between queries."""
        del model  # one counter for all models: a change of any moves it

        def run(conn: Connection) -> tuple[int, int]:
            at = _search.head(conn, namespace)
            return (0, 0) if at is None else at.fingerprint

        return self._read("reading vectors", run)

    def configure_search(self, config: str) -> bool:
        """Use PostgreSQL text-search configuration ``config``, rebuilding the index if it was
        built with another (True then); SQLite: nothing to do."""
        return self._write("configuring search", lambda c: _search.configure(c, config))

    def rebuild_search(self) -> int:
        """Rebuild the whole search index from the active entries; entries indexed."""
        return self._write("rebuilding the search index", _search.rebuild)


#: PostgreSQL's read back: the ids bound as one array, so the statement is the same whatever
#: their number (an expanded ``IN`` list is a new statement at each count).
_ACTIVE_PG = sa.select(entries).where(
    entries.c.namespace_id == sa.bindparam("ns"),
    entries.c.id == sa.any_(sa.bindparam("ids", type_=sa.ARRAY(entries.c.id.type))),
)


def _active(conn: Connection, ns_id: int, entry_ids: Sequence[str]) -> list[Entry]:
    """The active entries of ``ns_id`` among ``entry_ids``, in that order (the index only
    holds active entries; reading them back through ``entries`` checks it again)."""
    if not entry_ids:
        return []
    if conn.dialect.name == "postgresql":
        rows = conn.execute(_ACTIVE_PG, {"ns": ns_id, "ids": list(entry_ids)}).all()
    else:
        rows = conn.execute(
            sa.select(entries).where(
                entries.c.namespace_id == ns_id, entries.c.id.in_(list(entry_ids))
            )
        ).all()
    # Activity is checked here, not in SQL: with ``invalid_at IS NULL`` in the WHERE clause,
    # SQLite's planner walks the (namespace, invalid_at) index, every active entry, instead
    # of looking the few ids up by primary key.
    found = {r.id: entry_from_row(r) for r in rows if r.invalid_at is None}
    return [found[i] for i in entry_ids if i in found]


class ApprovalMethods(Transactions):
    """Pending approvals (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def pending_approvals(
        self, *, namespace: str | None = None, limit: int = 100
    ) -> list[ApprovalInfo]:
        return self._read(
            "listing approvals", lambda c: pending(c, namespace=namespace, limit=limit)
        )

    def decide_approval(
        self, approval_id: int, approve: bool, by: str, now: datetime
    ) -> ApprovalInfo:
        return self._write(
            "deciding an approval",
            lambda c: decide(c, approval_id, approve=approve, by=by, now=now),
        )

    def apply_approval(
        self,
        approval_id: int,
        *,
        by: str,
        build: ApprovalBuilder,
        sinks: Sequence[str] = (),
        now: datetime,
    ) -> tuple[ApprovalInfo, CommitResult]:
        """Approve and commit a waiting operation in one transaction, fenced like a merge.

        ``build`` turns the approval into the applied change; if it raises (e.g. the operation
        no longer validates), nothing is written and the approval stays pending.
        """
        return self._write(
            "applying an approval",
            lambda c: apply_approved(c, approval_id, by=by, build=build, sinks=sinks, now=now),
        )

    def reject_approval(self, approval_id: int, *, by: str, now: datetime) -> ApprovalInfo:
        """Reject a waiting operation; its candidates' ledger rows record the rejection."""
        return self._write(
            "rejecting an approval", lambda c: reject(c, approval_id, by=by, now=now)
        )


class ProgressMethods(Transactions):
    """Schedule ticks and source cursors (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def try_start_tick(
        self, schedule: str, tick: datetime, *, now: datetime, stale_after: timedelta | None = None
    ) -> bool:
        """Claim a scheduled tick; False when another beat already started or finished it."""
        return self._write(
            "starting a tick",
            lambda c: try_start_tick(c, schedule, tick, now=now, stale_after=stale_after),
        )

    def finish_tick(
        self,
        schedule: str,
        tick: datetime,
        *,
        ok: bool,
        window: tuple[datetime, datetime] | None,
        error: str | None,
        now: datetime,
    ) -> None:
        """Record a tick's outcome; a success moves the watermark forward (never back)."""
        self._write(
            "finishing a tick",
            lambda c: finish_tick(c, schedule, tick, ok=ok, window=window, error=error, now=now),
        )

    def watermark(self, schedule: str) -> datetime | None:
        return self._read("reading a watermark", lambda c: watermark(c, schedule))

    def last_ticks(self, schedule: str, limit: int = 5) -> list[TickInfo]:
        return self._read("listing ticks", lambda c: last_ticks(c, schedule, limit))

    def get_cursor(self, source: str, key: str) -> str | None:
        return self._read("reading a cursor", lambda c: get_cursor(c, source, key))

    def set_cursor(
        self, source: str, key: str, value: str, *, now: datetime, namespace: str | None = None
    ) -> None:
        self._write(
            "writing a cursor",
            lambda c: set_cursor(c, source, key, value, namespace=namespace, now=now),
        )

    def list_cursors(self, source: str, *, limit: int, after: str = "") -> list[tuple[str, str]]:
        """A page of ``source``'s (key, value) cursors with keys after ``after``, key order."""
        return self._read(
            f"listing {source} cursors",
            lambda c: list_cursors(c, source, limit=limit, after=after),
        )


class MemoryStore(DeliveryMethods, ProgressMethods, ApprovalMethods, SearchMethods):
    """Namespaces, files and their versions, entries, ledger, runs, erase and transfer; with
    the repositories of deliveries (:class:`~worker.store.outbox.DeliveryMethods`),
    schedule and source progress (:class:`~worker.store.memory.ProgressMethods`),
    approvals (:class:`~worker.store.memory.ApprovalMethods`) and search
    (:class:`~worker.store.memory.SearchMethods`), all over one transaction helper
    (:class:`~worker.store.engine.Transactions`)."""

    # --- lifecycle -------------------------------------------------------------------------
    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        create: bool = False,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        transaction_timeout: float = DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
    ) -> MemoryStore:
        """Open the store at ``url``: ``create=True`` migrates it first, otherwise an
        unmigrated database raises :class:`SchemaOutOfDate` (see
        :func:`~worker.store.engine.open_engine`)."""
        return cls(
            open_engine(
                url,
                create=create,
                connect_timeout=connect_timeout,
                transaction_timeout=transaction_timeout,
            )
        )

    def upgrade(self) -> None:
        """Migrate the database to the newest schema (safe to repeat)."""
        _schema.upgrade(self.engine)

    # --- state and commit ------------------------------------------------------------------
    def load_state(self, namespace: str) -> NamespaceState:
        """Active entries, version (0 when new), applied position and read-only paths."""
        return self._read("loading " + namespace, lambda c: _commit.load_state(c, namespace))

    def snapshot(
        self, namespace: str, candidate_ids: Iterable[str], *, read_clock: bool = False
    ) -> BatchSnapshot:
        """What a merge reads, in one read transaction: the state, the current files, which of
        ``candidate_ids`` the ledger already holds, and (``read_clock``) the database's clock
        (see :mod:`worker.store.commit`)."""
        ids = list(candidate_ids)
        return self._read(
            "loading " + namespace,
            lambda c: _commit.read_snapshot(c, namespace, ids, read_clock=read_clock),
        )

    def current_files(self, namespace: str) -> dict[str, str]:
        """Path → current content of each file of ``namespace``."""
        return self._read("reading files", lambda c: _commit.current_files(c, namespace))

    def already_recorded(self, namespace: str, candidate_ids: Iterable[str]) -> set[str]:
        """Which of ``candidate_ids`` the ledger of ``namespace`` already holds."""
        ids = list(candidate_ids)
        return self._read("ledger lookup", lambda c: _commit.already_recorded(c, namespace, ids))

    def commit_batch(
        self,
        *,
        namespace: str,
        expected_version: int,
        applied_position: str | None,
        applied: AppliedPlan,
        run: RunRecord,
        sinks: Sequence[str],
        now: datetime | None,
    ) -> CommitResult:
        """Commit one consolidated batch in one transaction, fenced by ``expected_version``
        (``now=None``: the database's clock, read in the commit itself).

        Raises :class:`StaleVersion` (and writes nothing) when the namespace moved on since
        ``expected_version`` was read, or the batch's candidates are already in the ledger.
        """
        return self._write(
            f"commit of {namespace}",
            lambda c: _commit.commit_batch(
                c,
                namespace=namespace,
                expected_version=expected_version,
                applied_position=applied_position,
                applied=applied,
                run=run,
                sinks=sinks,
                now=now,
            ),
        )

    def record_run(self, run: RunRecord) -> int:
        """Record a run that committed nothing (failed, dry run, stale); returns its id."""
        return self._write("recording a run", lambda c: _commit.insert_run(c, run))

    def runs(self, *, namespace: str | None = None, limit: int = 20) -> list[RunInfo]:
        """The newest runs, of one namespace or all."""
        return self._read(
            "listing runs", lambda c: _commit.list_runs(c, namespace=namespace, limit=limit)
        )

    def count_runs(self, *, outcome: str, since: datetime) -> int:
        """How many runs with ``outcome`` started at or after ``since`` (e.g. recent failures)."""
        return self._read(
            "counting runs", lambda c: _commit.count_runs(c, outcome=outcome, since=since)
        )

    # --- files and history -----------------------------------------------------------------
    def list_files(self, namespace: str) -> list[FileInfo]:
        return self._read("listing files", lambda c: _history.list_files(c, namespace))

    def namespaces(
        self,
        *,
        scope: str | None = None,
        user_id: str | None = None,
        containing: str | None = None,
        limit: int | None = None,
    ) -> list[str]:
        """Keys of namespaces with memory, optionally of one scope and/or user, or whose key
        contains ``containing`` (any case); the first ``limit`` by key."""
        return self._read(
            "listing namespaces",
            lambda c: _history.list_namespaces(
                c, scope=scope, user_id=user_id, containing=containing, limit=limit
            ),
        )

    def file_history(self, namespace: str, path: str) -> list[FileVersionInfo]:
        """All versions of a file, oldest first; :class:`NotFound` for an unknown file."""
        return self._read("reading history", lambda c: _history.file_history(c, namespace, path))

    def file_version(self, namespace: str, path: str, version: int) -> FileVersionInfo:
        return self._read(
            "reading a version", lambda c: _history.file_version(c, namespace, path, version)
        )

    # --- provenance (read-only, for operators) -----------------------------------------------
    def candidate_ledger(self, candidate_id: str) -> list[LedgerInfo]:
        """What became of ``candidate_id`` in every namespace that consumed it (none: it was
        never merged, or it was erased)."""
        return self._read(
            "reading the ledger", lambda c: _history.candidate_ledger_rows(c, candidate_id)
        )

    def entries_containing(self, namespace: str, text: str, *, limit: int) -> list[str]:
        """Ids of entries of ``namespace`` whose text contains ``text`` (any case), retired
        ones too, active first."""
        return self._read(
            "finding entries", lambda c: _history.entries_containing(c, namespace, text, limit)
        )

    def provenance(self, namespace: str, entry_ids: Sequence[str]) -> list[EntryProvenance]:
        """Each entry with the candidates behind it (see :mod:`worker.store.history`)."""
        return self._snapshot_read(
            "reading provenance", lambda c: _history.provenance(c, namespace, entry_ids)
        )

    def files_as_of(self, namespace: str, at: datetime) -> dict[str, FileVersionInfo]:
        """Each file of ``namespace`` at its version current at ``at``."""
        return self._snapshot_read(
            "reading history", lambda c: _history.files_as_of(c, namespace, at)
        )

    def rollback_file(
        self,
        *,
        namespace: str,
        path: str,
        to_version: int,
        author: str = ROLLBACK_AUTHOR,
        sinks: Sequence[str] = (),
        now: datetime,
    ) -> CommitResult:
        """Append a new version equal to ``to_version``; history is never rewritten."""
        return self._write(
            f"rollback of {namespace} {path}",
            lambda c: _history.rollback_file(
                c,
                namespace=namespace,
                path=path,
                to_version=to_version,
                author=author,
                sinks=sinks,
                now=now,
            ),
        )

    def put_file(
        self,
        *,
        namespace: str,
        path: str,
        content: str,
        author: str,
        sinks: Sequence[str] = (),
        now: datetime,
    ) -> CommitResult:
        """Write an operator-authored file (read-only for the consolidator from then on)."""
        return self._write(
            f"writing {namespace} {path}",
            lambda c: _history.put_file(
                c,
                namespace=namespace,
                path=path,
                content=content,
                author=author,
                sinks=sinks,
                now=now,
            ),
        )

    # --- erase, export, import -------------------------------------------------------------
    def erase_namespaces(
        self, namespaces: Sequence[str], *, now: datetime | None = None, sinks: Sequence[str] = ()
    ) -> EraseReport:
        """Delete every SQL row of ``namespaces``; queue an erase tombstone per file and sink.

        Tombstones go to ``sinks`` plus every sink that ever received these namespaces.
        """
        return self._write(
            "erase",
            lambda c: _transfer.erase_namespaces(c, namespaces, sinks=sinks, now=now),
        )

    def was_erased(self, namespace: str) -> bool:
        """True when ``namespace`` was erased and nothing was written to it since."""
        return self._read("erase fence", lambda c: _commit.erased_version(c, namespace) is not None)

    def erase_generation(self, namespace: str) -> int:
        """How many times ``namespace`` was erased; a delivery made for an older generation
        landed after an erase (see :mod:`worker.store.outbox`)."""
        return self._read("erase generation", lambda c: _commit.erase_generation(c, namespace))

    def recent_positions(self, limit: int = 500) -> list[tuple[str, str]]:
        """(namespace, applied queue position) of the most recently committed namespaces."""
        return self._read("positions", lambda c: _commit.recent_positions(c, limit))

    def export_namespace(self, namespace: str) -> dict[str, Any]:
        """One namespace as a JSON-able document (files with history, entries, ledger)."""
        return self._read("export", lambda c: _transfer.export_namespace(c, namespace))

    def import_namespace(
        self,
        data: Mapping[str, Any],
        *,
        now: datetime,
        namespace: str | None = None,
        sinks: Sequence[str] = (),
        restore_erased: bool = False,
    ) -> CommitResult:
        """Validate an export document, then write it in one transaction; a namespace that was
        erased is brought back only with ``restore_erased`` (else
        :class:`~worker.errors.ErasedNamespace`)."""
        doc = _transfer.parse_document(data)
        return self._write(
            "import",
            lambda c: _transfer.import_namespace(
                c, doc, namespace=namespace, sinks=sinks, now=now, restore_erased=restore_erased
            ),
        )

    def erased_namespaces(self, *keys: str) -> dict[str, int]:
        """Each of ``keys`` that was ever erased here, with how many times."""
        return self._read(
            "reading erase generations", lambda c: _transfer.erased_namespaces(c, *keys)
        )


def _info(r: Any) -> ApprovalInfo:
    return ApprovalInfo(
        id=int(r.id),
        namespace=r.key,
        path=r.path,
        operation=dict(r.operation),
        candidate_ids=tuple(r.candidate_ids),
        status=r.status,
        created_at=r.created_at,
        decided_at=r.decided_at,
        decided_by=r.decided_by,
    )


def _select() -> sa.Select[Any]:
    return sa.select(approvals, namespaces.c.key).join(
        namespaces, namespaces.c.id == approvals.c.namespace_id
    )


def pending(conn: Connection, *, namespace: str | None, limit: int) -> list[ApprovalInfo]:
    """Undecided approvals, oldest first, of one namespace or of all."""
    stmt = _select().where(approvals.c.status == "pending").order_by(approvals.c.id).limit(limit)
    if namespace is not None:
        stmt = stmt.where(namespaces.c.key == namespace)
    return [_info(r) for r in conn.execute(stmt)]


def decide(
    conn: Connection, approval_id: int, *, approve: bool, by: str, now: datetime
) -> ApprovalInfo:
    """Approve or reject a pending approval; a decided or unknown one is :class:`NotFound`."""
    now = require_utc(now, "now")
    changed = conn.execute(
        sa.update(approvals)
        .where(approvals.c.id == approval_id, approvals.c.status == "pending")
        .values(status="approved" if approve else "rejected", decided_at=now, decided_by=by)
        .returning(approvals.c.id)
    ).first()
    row = conn.execute(_select().where(approvals.c.id == approval_id)).first()
    if row is None:
        raise NotFound(
            f"approval {approval_id} does not exist; `memworker approvals list` lists them"
        )
    if changed is None:
        raise NotFound(
            f"approval {approval_id} is not pending: it was {row.status} by {row.decided_by} "
            f"at {row.decided_at.isoformat()}"
        )
    return _info(row)


#: Builds what approving commits: ``(approval, namespace state, current files) -> applied``.
ApprovalBuilder = Callable[[ApprovalInfo, NamespaceState, dict[str, str]], AppliedPlan]


def apply_approved(
    conn: Connection,
    approval_id: int,
    *,
    by: str,
    build: ApprovalBuilder,
    sinks: Sequence[str],
    now: datetime,
) -> tuple[ApprovalInfo, CommitResult]:
    """Approve ``approval_id`` and commit its operation as a new version, fenced like a merge."""
    info = decide(conn, approval_id, approve=True, by=by, now=now)
    state = _commit.load_state(conn, info.namespace)
    applied = build(info, state, _commit.current_files(conn, info.namespace))
    result = _commit.commit_batch(
        conn,
        namespace=info.namespace,
        expected_version=state.version,
        applied_position=state.applied_position,
        applied=applied,
        run=RunRecord(
            trigger="cli",
            namespace=info.namespace,
            started_at=now,
            finished_at=now,
            outcome="ok",
            candidates=len(info.candidate_ids),
            counts={"approved": 1},
        ),
        sinks=sinks,
        now=now,
    )
    op = info.operation.get("op")
    settle_ledger(
        conn,
        info,
        outcome="forgotten" if op == "invalidate" else "merged",
        reason=f"approved by {by}",
    )
    return info, result


def reject(conn: Connection, approval_id: int, *, by: str, now: datetime) -> ApprovalInfo:
    """Reject ``approval_id``; its candidates' ledger rows say so."""
    info = decide(conn, approval_id, approve=False, by=by, now=now)
    settle_ledger(conn, info, outcome="rejected", reason=f"rejected by {by}")
    return info


def settle_ledger(conn: Connection, info: ApprovalInfo, *, outcome: str, reason: str) -> None:
    """Ledger rows still ``pending_approval`` for the approval's candidates get the decision."""
    if not info.candidate_ids:
        return
    ns_id = sa.select(namespaces.c.id).where(namespaces.c.key == info.namespace).scalar_subquery()
    conn.execute(
        sa.update(candidate_ledger)
        .where(
            candidate_ledger.c.namespace_id == ns_id,
            candidate_ledger.c.candidate_id.in_(list(info.candidate_ids)),
            candidate_ledger.c.outcome == "pending_approval",
        )
        .values(outcome=outcome, reason=reason)
    )


def get_cursor(conn: Connection, source: str, key: str) -> str | None:
    """The stored value, or None when the source never recorded this key."""
    value: str | None = conn.execute(
        sa.select(source_cursors.c.value).where(
            source_cursors.c.source == source, source_cursors.c.key == key
        )
    ).scalar_one_or_none()
    return value


def set_cursor(
    conn: Connection, source: str, key: str, value: str, *, namespace: str | None, now: datetime
) -> None:
    """Insert or overwrite a cursor; ``namespace`` ties it to a user so an erase finds it."""
    now = require_utc(now, "now")
    insert = dialect_insert(conn, source_cursors).values(
        source=source, key=key, value=value, namespace=namespace, updated_at=now
    )
    set_: dict[str, object] = {"value": value, "updated_at": now}
    if namespace is not None:
        set_["namespace"] = namespace
    conn.execute(insert.on_conflict_do_update(index_elements=["source", "key"], set_=set_))


def list_cursors(
    conn: Connection, source: str, *, limit: int, after: str = ""
) -> list[tuple[str, str]]:
    """Up to ``limit`` (key, value) pairs of ``source`` with keys after ``after``, key order
    (a page; pass the last key back as ``after`` for the next)."""
    rows = conn.execute(
        sa.select(source_cursors.c.key, source_cursors.c.value)
        .where(source_cursors.c.source == source, source_cursors.c.key > after)
        .order_by(source_cursors.c.key)
        .limit(limit)
    ).all()
    return [(str(k), str(v)) for k, v in rows]


def try_start_tick(
    conn: Connection,
    schedule: str,
    tick: datetime,
    *,
    now: datetime,
    stale_after: timedelta | None,
) -> bool:
    """Claim ``tick`` of ``schedule``; False when it is running or done already."""
    tick = require_utc(tick, "tick")
    now = require_utc(now, "now")
    inserted = conn.execute(
        dialect_insert(conn, schedule_ticks)
        .values(schedule=schedule, tick=tick, status="running", attempts=1, started_at=now)
        .on_conflict_do_nothing(index_elements=["schedule", "tick"])
        .returning(schedule_ticks.c.id)
    ).first()
    # RETURNING, not rowcount: psycopg reports -1 for INSERT … ON CONFLICT DO NOTHING.
    if inserted is not None:
        return True
    retry = schedule_ticks.c.status == "failed"
    if stale_after is not None:
        retry = sa.or_(
            retry,
            sa.and_(
                schedule_ticks.c.status == "running",
                schedule_ticks.c.started_at < now - stale_after,
            ),
        )
    restarted = conn.execute(
        sa.update(schedule_ticks)
        .where(schedule_ticks.c.schedule == schedule, schedule_ticks.c.tick == tick, retry)
        .values(
            status="running",
            attempts=schedule_ticks.c.attempts + 1,
            started_at=now,
            finished_at=None,
            error=None,
        )
        .returning(schedule_ticks.c.id)
    ).first()
    return restarted is not None


def finish_tick(
    conn: Connection,
    schedule: str,
    tick: datetime,
    *,
    ok: bool,
    window: tuple[datetime, datetime] | None,
    error: str | None,
    now: datetime,
) -> None:
    """Record a tick's outcome; on success move the watermark to the window's end (or tick)."""
    tick = require_utc(tick, "tick")
    now = require_utc(now, "now")
    start, end = (
        (require_utc(window[0], "window start"), require_utc(window[1], "window end"))
        if window
        else (None, None)
    )
    done = conn.execute(
        sa.update(schedule_ticks)
        .where(schedule_ticks.c.schedule == schedule, schedule_ticks.c.tick == tick)
        .values(
            status="ok" if ok else "failed",
            finished_at=now,
            window_start=start,
            window_end=end,
            error=error,
        )
        .returning(schedule_ticks.c.id)
    ).first()
    if done is None:
        raise NotFound(
            f"schedule {schedule!r} has no started tick {tick.isoformat()}; "
            "call try_start_tick first"
        )
    if not ok:
        return
    mark = end or tick
    insert = dialect_insert(conn, schedule_watermarks).values(
        schedule=schedule, watermark=mark, updated_at=now
    )
    conn.execute(
        insert.on_conflict_do_update(
            index_elements=["schedule"],
            set_={"watermark": insert.excluded.watermark, "updated_at": now},
            # Never backwards: a late-finishing older tick leaves a newer watermark alone.
            where=schedule_watermarks.c.watermark < insert.excluded.watermark,
        )
    )


def watermark(conn: Connection, schedule: str) -> datetime | None:
    """End of the last successful window of ``schedule``, or None before its first success."""
    value: datetime | None = conn.execute(
        sa.select(schedule_watermarks.c.watermark).where(schedule_watermarks.c.schedule == schedule)
    ).scalar_one_or_none()
    return value


def last_ticks(conn: Connection, schedule: str, limit: int) -> list[TickInfo]:
    """The newest ``limit`` ticks of ``schedule``, newest first."""
    rows = conn.execute(
        sa.select(schedule_ticks)
        .where(schedule_ticks.c.schedule == schedule)
        .order_by(schedule_ticks.c.tick.desc())
        .limit(limit)
    )
    return [_tick(r) for r in rows]


def _tick(r: Any) -> TickInfo:
    return TickInfo(
        schedule=r.schedule,
        tick=r.tick,
        status=r.status,
        attempts=r.attempts,
        started_at=r.started_at,
        finished_at=r.finished_at,
        window=(r.window_start, r.window_end) if r.window_start and r.window_end else None,
        error=r.error,
    )


class StoreHealth(Transactions):
    """Read-only health figures of the store at one engine."""

    @classmethod
    def from_url(cls, url: str, *, create: bool = False) -> StoreHealth:
        """Open the store at ``url`` as :meth:`MemoryStore.from_url
        <worker.store.memory.MemoryStore.from_url>` does."""
        return cls(open_engine(url, create=create))

    def last_ticks(self, schedule: str, limit: int = 5) -> list[TickInfo]:
        return self._read("listing ticks", lambda c: last_ticks(c, schedule, limit))

    def watermark(self, schedule: str) -> datetime | None:
        return self._read("reading a watermark", lambda c: watermark(c, schedule))

    def outbox_lag(self, *, now: datetime | None = None) -> dict[str, SinkLag]:
        """Per sink: pending deliveries and the age in seconds of the oldest."""
        return self._read("measuring outbox lag", lambda c: _outbox.lag(c, now=now))

    def sink_health(self) -> list[SinkHealth]:
        """The breaker of every sink seen."""
        return self._read("reading sink health", _outbox.read_all)

    def count_runs(self, *, outcome: str, since: datetime) -> int:
        """How many runs with ``outcome`` started at or after ``since``."""
        return self._read(
            "counting runs", lambda c: _commit.count_runs(c, outcome=outcome, since=since)
        )

    def recent_positions(self, limit: int = 500) -> list[tuple[str, str]]:
        """(namespace, applied queue position) of the most recently committed namespaces."""
        return self._read("positions", lambda c: _commit.recent_positions(c, limit))
