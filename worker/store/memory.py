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

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from worker.errors import MemworkerError, StoreUnavailable
from worker.store import approvals as _approvals
from worker.store import clock as _clock
from worker.store import commit as _commit
from worker.store import cursors as _cursors
from worker.store import erase as _erase
from worker.store import fence as _fence
from worker.store import history as _history
from worker.store import migrate as _migrate
from worker.store import outbox as _outbox
from worker.store import runs as _runs
from worker.store import schedule_ledger as _ticks
from worker.store import sink_health as _health
from worker.store import snapshot as _snapshot
from worker.store import transfer as _transfer
from worker.store.engine import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_TRANSACTION_TIMEOUT_SECONDS,
    create_store_engine,
    read_transaction,
    write_transaction,
)
from worker.store.records import (
    ROLLBACK_AUTHOR,
    ApprovalInfo,
    CommitResult,
    EraseReport,
    FileInfo,
    FileVersionInfo,
    OutboxItem,
    RunInfo,
    RunRecord,
    SinkHealth,
    SinkLag,
    TickInfo,
)
from worker.store.search_methods import SearchMethods
from worker.store.snapshot import BatchSnapshot
from worker.values import AppliedPlan, NamespaceState

__all__ = ["BatchSnapshot", "CommitResult", "MemoryStore", "RunRecord"]

T = TypeVar("T")


class MemoryStore(SearchMethods):
    """Namespaces, files and their versions, entries, ledger, runs, schedules, outbox; search
    (:class:`~worker.store.search_methods.SearchMethods`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

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
        engine = create_store_engine(
            url,
            create_dirs=create,
            connect_timeout=connect_timeout,
            transaction_timeout=transaction_timeout,
        )
        try:
            if create:
                _migrate.upgrade(engine)
            _migrate.check_migrated(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def upgrade(self) -> None:
        """Migrate the database to the newest schema (safe to repeat)."""
        _migrate.upgrade(self.engine)

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    @contextmanager
    def _tx(self, *, write: bool, what: str) -> Iterator[Connection]:
        # Database failures become StoreError; our own errors pass through. Either way the
        # transaction is rolled back, so nothing is half-written.
        try:
            with (write_transaction if write else read_transaction)(self.engine) as conn:
                yield conn
        except MemworkerError:
            raise
        except sa.exc.SQLAlchemyError as exc:
            detail = getattr(exc, "orig", None) or exc
            raise StoreUnavailable(
                f"{what} failed and was rolled back (nothing was written): {detail}"
            ) from exc

    def _read(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self._tx(write=False, what=what) as conn:
            return fn(conn)

    def _write(self, what: str, fn: Callable[[Connection], T]) -> T:
        with self._tx(write=True, what=what) as conn:
            return fn(conn)

    def db_now(self) -> datetime:
        """The database server's current time: the clock of every SQL-side time that two
        processes compare (see :mod:`worker.store.clock`)."""
        return self._read("reading the database clock", _clock.db_now)

    # --- state and commit ------------------------------------------------------------------
    def load_state(self, namespace: str) -> NamespaceState:
        """Active entries, version (0 when new), applied position and read-only paths."""
        return self._read("loading " + namespace, lambda c: _commit.load_state(c, namespace))

    def snapshot(self, namespace: str, candidate_ids: Iterable[str]) -> BatchSnapshot:
        """What a merge reads, in one read transaction: the state, the current files, and which
        of ``candidate_ids`` the ledger already holds (see :mod:`worker.store.snapshot`)."""
        ids = list(candidate_ids)
        return self._read(
            "loading " + namespace, lambda c: _snapshot.read_snapshot(c, namespace, ids)
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

    def namespaces(self, *, scope: str | None = None, user_id: str | None = None) -> list[str]:
        """Keys of namespaces with memory, optionally of one scope and/or user."""
        return self._read(
            "listing namespaces",
            lambda c: _history.list_namespaces(c, scope=scope, user_id=user_id),
        )

    def file_history(self, namespace: str, path: str) -> list[FileVersionInfo]:
        """All versions of a file, oldest first; :class:`NotFound` for an unknown file."""
        return self._read("reading history", lambda c: _history.file_history(c, namespace, path))

    def file_version(self, namespace: str, path: str, version: int) -> FileVersionInfo:
        return self._read(
            "reading a version", lambda c: _history.file_version(c, namespace, path, version)
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

    # --- outbox ----------------------------------------------------------------------------
    def due_outbox(
        self, *, sink: str | None, now: datetime | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Deliveries due at ``now`` (of one sink, or all), oldest first."""
        return self._read(
            "reading the outbox", lambda c: _outbox.due(c, sink=sink, now=now, limit=limit)
        )

    def claim_outbox(
        self,
        *,
        sink: str,
        claimant: str,
        now: datetime | None = None,
        lease: timedelta,
        limit: int,
        namespaces: Sequence[str] | None = None,
    ) -> list[OutboxItem]:
        """Claim due deliveries of ``sink`` (see :func:`worker.store.outbox.claim`)."""
        return self._write(
            "claiming deliveries",
            lambda c: _outbox.claim(
                c,
                sink=sink,
                claimant=claimant,
                now=now,
                lease=lease,
                limit=limit,
                namespaces=namespaces,
            ),
        )

    def release_outbox(self, outbox_ids: Sequence[int]) -> None:
        """Give claimed, unattempted deliveries back."""
        ids = list(outbox_ids)
        if ids:
            self._write("releasing deliveries", lambda c: _outbox.release(c, ids))

    def outbox_pending(self, *, namespaces: Sequence[str] | None = None) -> int:
        """Undelivered items (newest per item and sink), due or waiting for a retry."""
        return self._read(
            "counting deliveries", lambda c: _outbox.pending_count(c, namespaces=namespaces)
        )

    def sink_health(self, sink: str | None = None) -> list[SinkHealth]:
        """The breaker of ``sink`` (a healthy default when never seen), or of every sink seen."""
        if sink is None:
            return self._read("reading sink health", _health.read_all)
        return [self._read("reading sink health", lambda c: _health.read(c, sink))]

    def record_sink_failure(
        self, sink: str, error: str, *, now: datetime | None = None, namespace: str | None = None
    ) -> SinkHealth:
        """Count a failed delivery (of ``namespace``) toward the sink's breaker."""
        return self._write(
            "recording a sink failure",
            lambda c: _health.record_failure(c, sink, error, now=now, namespace=namespace),
        )

    def record_sink_success(self, sink: str, *, now: datetime | None = None) -> None:
        self._write("recording a sink success", lambda c: _health.record_success(c, sink, now=now))

    def mark_delivered(self, outbox_id: int, *, now: datetime | None = None) -> None:
        self._write("marking a delivery", lambda c: _outbox.mark_delivered(c, outbox_id, now=now))

    def mark_delivery_failed(
        self,
        outbox_id: int,
        error: str,
        *,
        next_attempt_at: datetime | None = None,
        retry_in: timedelta | None = None,
        now: datetime | None = None,
    ) -> None:
        """Count a failed attempt; retry at ``next_attempt_at`` or ``retry_in`` after now."""
        self._write(
            "recording a failed delivery",
            lambda c: _outbox.mark_failed(
                c, outbox_id, error, next_attempt_at=next_attempt_at, retry_in=retry_in, now=now
            ),
        )

    def outbox_lag(self, *, now: datetime | None = None) -> dict[str, SinkLag]:
        """Per sink: pending deliveries and the age in seconds of the oldest."""
        return self._read("measuring outbox lag", lambda c: _outbox.lag(c, now=now))

    # --- schedules -------------------------------------------------------------------------
    def try_start_tick(
        self, schedule: str, tick: datetime, *, now: datetime, stale_after: timedelta | None = None
    ) -> bool:
        """Claim a scheduled tick; False when another beat already started or finished it."""
        return self._write(
            "starting a tick",
            lambda c: _ticks.try_start_tick(c, schedule, tick, now=now, stale_after=stale_after),
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
            lambda c: _ticks.finish_tick(
                c, schedule, tick, ok=ok, window=window, error=error, now=now
            ),
        )

    def watermark(self, schedule: str) -> datetime | None:
        return self._read("reading a watermark", lambda c: _ticks.watermark(c, schedule))

    def last_ticks(self, schedule: str, limit: int = 5) -> list[TickInfo]:
        return self._read("listing ticks", lambda c: _ticks.last_ticks(c, schedule, limit))

    # --- cursors ---------------------------------------------------------------------------
    def get_cursor(self, source: str, key: str) -> str | None:
        return self._read("reading a cursor", lambda c: _cursors.get_cursor(c, source, key))

    def set_cursor(
        self, source: str, key: str, value: str, *, now: datetime, namespace: str | None = None
    ) -> None:
        self._write(
            "writing a cursor",
            lambda c: _cursors.set_cursor(c, source, key, value, namespace=namespace, now=now),
        )

    def list_cursors(self, source: str, *, limit: int, after: str = "") -> list[tuple[str, str]]:
        """A page of ``source``'s (key, value) cursors with keys after ``after``, key order."""
        return self._read(
            f"listing {source} cursors",
            lambda c: _cursors.list_cursors(c, source, limit=limit, after=after),
        )

    # --- approvals -------------------------------------------------------------------------
    def pending_approvals(
        self, *, namespace: str | None = None, limit: int = 100
    ) -> list[ApprovalInfo]:
        return self._read(
            "listing approvals", lambda c: _approvals.pending(c, namespace=namespace, limit=limit)
        )

    def decide_approval(
        self, approval_id: int, approve: bool, by: str, now: datetime
    ) -> ApprovalInfo:
        return self._write(
            "deciding an approval",
            lambda c: _approvals.decide(c, approval_id, approve=approve, by=by, now=now),
        )

    def apply_approval(
        self,
        approval_id: int,
        *,
        by: str,
        build: _approvals.ApprovalBuilder,
        sinks: Sequence[str] = (),
        now: datetime,
    ) -> tuple[ApprovalInfo, CommitResult]:
        """Approve and commit a waiting operation in one transaction, fenced like a merge.

        ``build`` turns the approval into the applied change; if it raises (e.g. the operation
        no longer validates), nothing is written and the approval stays pending.
        """
        return self._write(
            "applying an approval",
            lambda c: _approvals.apply_approved(
                c, approval_id, by=by, build=build, sinks=sinks, now=now
            ),
        )

    def reject_approval(self, approval_id: int, *, by: str, now: datetime) -> ApprovalInfo:
        """Reject a waiting operation; its candidates' ledger rows record the rejection."""
        return self._write(
            "rejecting an approval", lambda c: _approvals.reject(c, approval_id, by=by, now=now)
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

    def take_back(
        self, *, sink: str, namespace: str, path: str, now: datetime | None = None
    ) -> None:
        """Make ``sink`` end with the item's current state after an erased copy landed there
        (see :func:`worker.store.outbox.take_back`)."""
        self._write(
            "taking a delivery back",
            lambda c: _outbox.take_back(c, sink=sink, namespace=namespace, path=path, now=now),
        )

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
    ) -> CommitResult:
        """Validate an export document, then write it in one transaction."""
        doc = _transfer.parse_document(data)
        return self._write(
            "import",
            lambda c: _transfer.import_namespace(c, doc, namespace=namespace, sinks=sinks, now=now),
        )
