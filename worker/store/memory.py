"""The memory store: one facade over the SQL source of truth.

Each method is one transaction. Methods that stamp or compare times other processes read
(outbox retries and claims, sink breakers, erase tombstones) take ``now=None`` for the
database's clock (:mod:`worker.store.clock`), read in their own transaction; a timezone-aware
``now`` is a test's injected time. Nothing here reads the host's clock or the environment.

>>> from datetime import UTC, datetime
>>> from worker.values import AppliedPlan, Entry, FileChange, LedgerRow
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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from worker.store import commit as _commit
from worker.store import erase as _erase
from worker.store import fence as _fence
from worker.store import history as _history
from worker.store import migrate as _migrate
from worker.store import provenance as _provenance
from worker.store import runs as _runs
from worker.store import snapshot as _snapshot
from worker.store import transfer as _transfer
from worker.store.approval_methods import ApprovalMethods
from worker.store.delivery_methods import DeliveryMethods
from worker.store.engine import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
)
from worker.store.progress_methods import ProgressMethods
from worker.store.records import (
    ROLLBACK_AUTHOR,
    CommitResult,
    EntryProvenance,
    EraseReport,
    FileInfo,
    FileVersionInfo,
    LedgerInfo,
    RunInfo,
    RunRecord,
)
from worker.store.search_methods import SearchMethods
from worker.store.snapshot import BatchSnapshot
from worker.store.transactions import open_engine
from worker.values import AppliedPlan, NamespaceState

__all__ = ["BatchSnapshot", "CommitResult", "MemoryStore", "RunRecord"]


class MemoryStore(DeliveryMethods, ProgressMethods, ApprovalMethods, SearchMethods):
    """Namespaces, files and their versions, entries, ledger, runs, erase and transfer; with
    the repositories of deliveries (:class:`~worker.store.delivery_methods.DeliveryMethods`),
    schedule and source progress (:class:`~worker.store.progress_methods.ProgressMethods`),
    approvals (:class:`~worker.store.approval_methods.ApprovalMethods`) and search
    (:class:`~worker.store.search_methods.SearchMethods`), all over one transaction helper
    (:class:`~worker.store.transactions.Transactions`)."""

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
        """Open the store at ``url``.

        ``create=True`` migrates the database to the newest schema first (embedded mode);
        otherwise a database that is not migrated raises :class:`SchemaOutOfDate` telling you
        to run ``memworker db upgrade``. The timeouts bound a PostgreSQL connect and each
        transaction (see :func:`worker.store.engine.create_store_engine`).
        """
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
        _migrate.upgrade(self.engine)

    # --- state and commit ------------------------------------------------------------------
    def load_state(self, namespace: str) -> NamespaceState:
        """Active entries, version (0 when new), applied position and read-only paths."""
        return self._read("loading " + namespace, lambda c: _snapshot.load_state(c, namespace))

    def snapshot(
        self, namespace: str, candidate_ids: Iterable[str], *, read_clock: bool = False
    ) -> BatchSnapshot:
        """What a merge reads, in one read transaction: the state, the current files, which of
        ``candidate_ids`` the ledger already holds, and (``read_clock``) the database's clock
        (see :mod:`worker.store.snapshot`)."""
        ids = list(candidate_ids)
        return self._read(
            "loading " + namespace,
            lambda c: _snapshot.read_snapshot(c, namespace, ids, read_clock=read_clock),
        )

    def current_files(self, namespace: str) -> dict[str, str]:
        """Path → current content of each file of ``namespace``."""
        return self._read("reading files", lambda c: _snapshot.current_files(c, namespace))

    def already_recorded(self, namespace: str, candidate_ids: Iterable[str]) -> set[str]:
        """Which of ``candidate_ids`` the ledger of ``namespace`` already holds."""
        ids = list(candidate_ids)
        return self._read("ledger lookup", lambda c: _snapshot.already_recorded(c, namespace, ids))

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
        """Commit one consolidated batch in one transaction, fenced by ``expected_version``.

        ``now=None``: the commit's time is the database's clock, read in the commit itself.

        Raises :class:`StaleVersion` (and writes nothing) when the namespace moved on since
        ``expected_version`` was read, or when the batch's candidates are already in the
        ledger (a redelivery).
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
        return self._write("recording a run", lambda c: _runs.insert_run(c, run))

    def runs(self, *, namespace: str | None = None, limit: int = 20) -> list[RunInfo]:
        """The newest runs, of one namespace or all."""
        return self._read(
            "listing runs", lambda c: _runs.list_runs(c, namespace=namespace, limit=limit)
        )

    def count_runs(self, *, outcome: str, since: datetime) -> int:
        """How many runs with ``outcome`` started at or after ``since`` (e.g. recent failures)."""
        return self._read(
            "counting runs", lambda c: _runs.count_runs(c, outcome=outcome, since=since)
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
            "reading the ledger", lambda c: _provenance.candidate_ledger_rows(c, candidate_id)
        )

    def entries_containing(self, namespace: str, text: str, *, limit: int) -> list[str]:
        """Ids of entries of ``namespace`` whose text contains ``text`` (any case), retired
        ones too, active first."""
        return self._read(
            "finding entries", lambda c: _provenance.entries_containing(c, namespace, text, limit)
        )

    def provenance(self, namespace: str, entry_ids: Sequence[str]) -> list[EntryProvenance]:
        """Each entry with the candidates behind it (see :mod:`worker.store.provenance`)."""
        return self._snapshot_read(
            "reading provenance", lambda c: _provenance.provenance(c, namespace, entry_ids)
        )

    def files_as_of(self, namespace: str, at: datetime) -> dict[str, FileVersionInfo]:
        """Each file of ``namespace`` at its version current at ``at``."""
        return self._snapshot_read(
            "reading history", lambda c: _provenance.files_as_of(c, namespace, at)
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
            lambda c: _erase.erase_namespaces(c, namespaces, sinks=sinks, now=now),
        )

    def was_erased(self, namespace: str) -> bool:
        """True when ``namespace`` was erased and nothing was written to it since."""
        return self._read("erase fence", lambda c: _fence.erased_version(c, namespace) is not None)

    def erase_generation(self, namespace: str) -> int:
        """How many times ``namespace`` was erased; a delivery made for an older generation
        landed after an erase (see :mod:`worker.store.outbox`)."""
        return self._read("erase generation", lambda c: _fence.erase_generation(c, namespace))

    def recent_positions(self, limit: int = 500) -> list[tuple[str, str]]:
        """(namespace, applied queue position) of the most recently committed namespaces."""
        return self._read("positions", lambda c: _fence.recent_positions(c, limit))

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
