"""Delivering committed versions: the outbox, and each sink's breaker.

Outbox rows are written in the same transaction as the versions they publish. Sinks hold the
latest state of each item, so per (sink, namespace, path) only the newest row is ever due, and
delivering it retires the older ones: a slow retry of version 3 never overwrites version 4,
and an erase followed by a new memory ends with the memory.

**Claims.** A deliverer claims rows before it calls a sink (:func:`claim`): no other deliverer
can claim them, or any other row of the same item, until the lease ends or the outcome is
recorded. Claims of one sink are serialised (a PostgreSQL advisory lock; SQLite's single
writer), so each row is attempted by one deliverer at a time.

**Erase reaches in-flight deliveries.** Each claimed row carries its namespace's erase
generation (:func:`worker.store.commit.erase_generation`); the deliverer compares it again after
the sink call and takes a copy that landed after an erase back out (:func:`take_back`). A failed
call may still land later: the row is *in doubt* for :data:`LATE_WRITE`, an erase tombstone of
the item inherits that time and is delivered once more when it has passed, and a newer version
of the item waits for it, so the last write to land is never the erased one. Ids are never
reused (``AUTOINCREMENT`` on SQLite), so a stale deliverer's mark cannot land on a newer row.

**Breakers**, shared by every deliverer through SQL: a sink that fails :data:`BREAKER_THRESHOLD`
deliveries in a row is *open*, left alone until ``open_until``, then probed once; a failed probe
opens it for twice as long (capped), a success closes it. Failures of one namespace in a row
count once (``failing_digest``), so a single item the sink refuses cannot open the breaker for
every user.

Times other processes compare (claims, retries, breakers) default to the database's clock
(``now=None``); a timezone-aware ``now`` is a test's injected time.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import MAX_ERROR_CHARS, NotFound
from worker.store import commit as _commit
from worker.store.engine import Transactions, dialect_insert, param, resolve
from worker.store.records import OutboxItem, SinkHealth, SinkLag
from worker.store.schema import file_versions, memory_files, namespaces, outbox, sink_health

#: How long after a sink call failed (or its deliverer's claim ran out) its write may still
#: land: a server that finishes a request its client gave up on does so within its own request
#: timeout, well under this.
LATE_WRITE: Final = timedelta(seconds=120)

_newer = outbox.alias("newer")


def _is_latest() -> sa.ColumnElement[bool]:
    """No newer row exists for the same item of the same sink."""
    return ~sa.exists().where(
        _newer.c.sink == outbox.c.sink,
        _newer.c.namespace == outbox.c.namespace,
        _newer.c.path == outbox.c.path,
        _newer.c.id > outbox.c.id,
    )


def _item_is_unclaimed(now: Any) -> sa.ColumnElement[bool]:
    """No row of the same item of the same sink is under a live claim (this one included)."""
    return ~sa.exists().where(
        _newer.c.sink == outbox.c.sink,
        _newer.c.namespace == outbox.c.namespace,
        _newer.c.path == outbox.c.path,
        _newer.c.delivered_at.is_(None),
        _newer.c.claim_expires_at > now,
    )


def _no_erase_in_doubt(now: Any) -> sa.ColumnElement[bool]:
    """No older erase tombstone of the item still waits for a write in doubt to land: a newer
    version is delivered after that time, so the erased copy can never be the last write."""
    return ~sa.exists().where(
        _newer.c.sink == outbox.c.sink,
        _newer.c.namespace == outbox.c.namespace,
        _newer.c.path == outbox.c.path,
        _newer.c.id < outbox.c.id,
        _newer.c.kind == "erase",
        _newer.c.in_doubt_until > now,
    )


def _due_filter(now: Any) -> sa.ColumnElement[bool]:
    """Due at ``now``: a time, or a parameter of a statement built once."""
    return sa.and_(
        outbox.c.delivered_at.is_(None),
        outbox.c.next_attempt_at <= now,
        _is_latest(),
        _no_erase_in_doubt(now),
    )


def due(
    conn: Connection, *, sink: str | None, now: datetime | None, limit: int
) -> list[OutboxItem]:
    """Undelivered, due, newest-per-item rows, oldest first, with their committed content
    (claimed or not: this is what an operator sees, not what a deliverer takes)."""
    now = resolve(conn, now)
    stmt = _select_items().where(_due_filter(now)).order_by(outbox.c.id).limit(limit)
    if sink is not None:
        stmt = stmt.where(outbox.c.sink == sink)
    rows = list(conn.execute(stmt))
    generation = _commit.generations(conn, sorted({r.namespace for r in rows}))
    return [_item(r, generation[r.namespace]) for r in rows]


def claim(
    conn: Connection,
    *,
    sink: str,
    claimant: str,
    now: datetime | None,
    lease: timedelta,
    limit: int,
    namespaces: Sequence[str] | None = None,
) -> list[OutboxItem]:
    """Claim up to ``limit`` due rows of ``sink`` for ``claimant`` until ``now + lease``.

    ``namespaces`` restricts the claim to those namespaces (an operator command publishes only
    what it touched). Call inside a write transaction; the claim is visible once it commits.
    """
    _serialise_claims(conn, sink)
    now = resolve(conn, now)  # after the lock: the lease starts when the claim is made
    found = conn.execute(
        _claimable(limit, by_namespace=namespaces is not None),
        {"c_sink": sink, "c_now": now, "c_namespaces": list(namespaces or ())},
    )
    ids = [int(i) for i in found.scalars()]
    if not ids:
        return []
    until = now + lease
    conn.execute(_CLAIM, {"c_ids": ids, "c_by": claimant[:200], "c_until": until})
    rows = list(conn.execute(_CLAIMED, {"c_ids": ids}))
    generation = _commit.generations(conn, sorted({r.namespace for r in rows}))
    return [_item(r, generation[r.namespace]) for r in rows]


@functools.lru_cache(maxsize=32)  # limits are a deployment's few settings
def _claimable(limit: int, *, by_namespace: bool) -> sa.Select[Any]:
    """:func:`claim`'s search, built once per limit (:mod:`worker.store.engine`)."""
    now = param(outbox.c.next_attempt_at, "c_now")
    stmt = (
        sa.select(outbox.c.id)
        .where(outbox.c.sink == param(outbox.c.sink, "c_sink"), _due_filter(now))
        .where(_item_is_unclaimed(now))
        .order_by(outbox.c.id)
        .limit(limit)
    )
    if by_namespace:
        names = param(outbox.c.namespace, "c_namespaces", expanding=True)
        stmt = stmt.where(outbox.c.namespace.in_(names))
    return stmt


def _claimed_ids() -> Any:
    return outbox.c.id.in_(param(outbox.c.id, "c_ids", expanding=True))


_CLAIM: Final = (
    sa.update(outbox)
    .where(_claimed_ids())
    .values(
        claimed_by=param(outbox.c.claimed_by, "c_by"),
        claim_expires_at=param(outbox.c.claim_expires_at, "c_until"),
    )
)


def release(conn: Connection, outbox_ids: Sequence[int]) -> None:
    """Give claimed rows back unattempted (a pass ran out of time, or the sink's breaker
    opened), so another deliverer may take them at once."""
    if outbox_ids:
        conn.execute(
            sa.update(outbox)
            .where(outbox.c.id.in_(list(outbox_ids)), outbox.c.delivered_at.is_(None))
            .values(claimed_by=None, claim_expires_at=None)
        )


def pending_count(conn: Connection, *, namespaces: Sequence[str] | None = None) -> int:
    """Undelivered newest-per-item rows (due now or waiting for a retry), of all sinks."""
    stmt = (
        sa.select(sa.func.count())
        .select_from(outbox)
        .where(outbox.c.delivered_at.is_(None), _is_latest())
    )
    if namespaces is not None:
        stmt = stmt.where(outbox.c.namespace.in_(list(namespaces)))
    return int(conn.execute(stmt).scalar_one())


def _serialise_claims(conn: Connection, sink: str) -> None:
    """Only one claiming transaction per sink at a time: the item check and the claim must not
    interleave with another deliverer's. SQLite writers are serialised already."""
    if conn.dialect.name == "postgresql":
        key = zlib.crc32(f"memworker.outbox:{sink}".encode()) - 2**31
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def _select_items() -> sa.Select[Any]:
    return sa.select(
        outbox,
        file_versions.c.content,
        file_versions.c.version,
        file_versions.c.created_at.label("version_created_at"),
        memory_files.c.created_at.label("file_created_at"),
    ).select_from(
        outbox.outerjoin(file_versions, file_versions.c.id == outbox.c.file_version_id).outerjoin(
            memory_files, memory_files.c.id == file_versions.c.file_id
        )
    )


def _item(r: Any, generation: int = 0) -> OutboxItem:
    deleted = r.kind == "erase"
    return OutboxItem(
        id=int(r.id),
        sink=r.sink,
        namespace=r.namespace,
        path=r.path,
        deleted=deleted,
        content="" if deleted else r.content,
        version=0 if deleted else r.version,
        created_at=r.created_at if deleted else r.file_created_at,
        modified_at=r.created_at if deleted else r.version_created_at,
        attempts=r.attempts,
        last_error=r.last_error,
        generation=generation,
    )


def _row(conn: Connection, outbox_id: int) -> Any:
    row = conn.execute(sa.select(outbox).where(outbox.c.id == outbox_id)).first()
    if row is None:
        raise NotFound(
            f"outbox item {outbox_id} does not exist (already delivered and retired, or erased)"
        )
    return row


#: :func:`mark_delivered`'s statements, built once (:mod:`worker.store.engine`).
_MARK_PUBLISHED: Final = (
    sa.update(outbox)
    .where(outbox.c.id == param(outbox.c.id, "o_id"), outbox.c.kind != "erase")
    .values(
        delivered_at=param(outbox.c.delivered_at, "o_now"),
        attempts=outbox.c.attempts + 1,
        last_error=None,
        claimed_by=None,
        claim_expires_at=None,
    )
    .returning(outbox.c.id, outbox.c.sink, outbox.c.namespace, outbox.c.path)
)
_OLDER_OF_ITEM: Final = sa.and_(
    outbox.c.sink == param(outbox.c.sink, "o_sink"),
    outbox.c.namespace == param(outbox.c.namespace, "o_namespace"),
    outbox.c.path == param(outbox.c.path, "o_path"),
    outbox.c.id < param(outbox.c.id, "o_id"),
)
_DROP_OLDER_ERASES: Final = sa.delete(outbox).where(_OLDER_OF_ITEM, outbox.c.kind == "erase")
_RETIRE_OLDER: Final = (
    sa.update(outbox)
    .where(_OLDER_OF_ITEM, outbox.c.delivered_at.is_(None))
    .values(
        delivered_at=param(outbox.c.delivered_at, "o_now"),
        superseded_by=param(outbox.c.superseded_by, "o_id"),
    )
)


def mark_delivered(conn: Connection, outbox_id: int, *, now: datetime | None) -> None:
    """Record a delivery and retire older rows of the same item for this sink.

    A tombstone whose item has a write in doubt is delivered again when that has passed;
    otherwise a delivered erase tombstone is deleted: it names the erased namespace, and once
    every sink has deleted the data nothing of that user may remain.

    A published version (the common case) is marked by one ``UPDATE … RETURNING`` that also
    names its item, with no read first; an erase tombstone, or a row that is gone, is read.
    """
    now = resolve(conn, now)
    row = conn.execute(_MARK_PUBLISHED, {"o_id": outbox_id, "o_now": now}).first()
    tombstone = row is None
    if row is None:
        row = _row(conn, outbox_id)  # an erase tombstone (NotFound: gone with an erase)
    item = {"o_sink": row.sink, "o_namespace": row.namespace, "o_path": row.path, "o_id": row.id}
    conn.execute(_DROP_OLDER_ERASES, item)
    conn.execute(_RETIRE_OLDER, item | {"o_now": now})
    if not tombstone:
        return  # marked by the first statement
    if row.in_doubt_until is not None and row.in_doubt_until > now:
        # A write given up on may still land until then: delete the item again at that time.
        conn.execute(
            sa.update(outbox)
            .where(outbox.c.id == row.id)
            .values(
                next_attempt_at=row.in_doubt_until,
                attempts=outbox.c.attempts + 1,
                claimed_by=None,
                claim_expires_at=None,
            )
        )
    else:
        conn.execute(sa.delete(outbox).where(outbox.c.id == row.id))


def mark_delivered_unless_erased(
    conn: Connection, outbox_id: int, *, namespace: str, generation: int, now: datetime | None
) -> bool:
    """:func:`mark_delivered`, in the transaction that re-checks the erase generation after
    the sink call: False, and nothing marked, when ``namespace`` was erased since the row was
    claimed at ``generation`` (the deliverer then takes its copy back)."""
    if _commit.erase_generation(conn, namespace) != generation:
        return False
    mark_delivered(conn, outbox_id, now=now)
    return True


def mark_failed(
    conn: Connection,
    outbox_id: int,
    error: str,
    *,
    next_attempt_at: datetime | None = None,
    retry_in: timedelta | None = None,
    now: datetime | None,
) -> None:
    """Count a failed attempt and schedule the next one: at ``next_attempt_at``, or
    ``retry_in`` after ``now`` (the database's clock when None)."""
    now = resolve(conn, now)
    if next_attempt_at is None:
        next_attempt_at = now + (retry_in or timedelta(0))
    next_attempt_at = resolve(conn, next_attempt_at, "next_attempt_at")
    _row(conn, outbox_id)
    conn.execute(
        sa.update(outbox)
        .where(outbox.c.id == outbox_id)
        .values(
            attempts=outbox.c.attempts + 1,
            last_error=error[:MAX_ERROR_CHARS],
            next_attempt_at=next_attempt_at,
            claimed_by=None,
            claim_expires_at=None,
            # The call may have reached the sink after all and still land.
            in_doubt_until=now + LATE_WRITE,
        )
    )


def in_doubt(
    conn: Connection, keys: Sequence[str], *, now: datetime
) -> dict[tuple[str, str, str], datetime]:
    """Per (sink, namespace, path) of ``keys``: until when a write may still land (a failed
    call's :data:`LATE_WRITE`, or a live claim's end plus it). Read by an erase before it deletes
    the rows, so its tombstones are delivered once more after that time."""
    found: dict[tuple[str, str, str], datetime] = {}
    rows = conn.execute(
        sa.select(
            outbox.c.sink,
            outbox.c.namespace,
            outbox.c.path,
            outbox.c.in_doubt_until,
            outbox.c.claim_expires_at,
        ).where(
            outbox.c.namespace.in_(list(keys)),
            sa.or_(
                outbox.c.in_doubt_until > now,
                sa.and_(outbox.c.delivered_at.is_(None), outbox.c.claim_expires_at > now),
            ),
        )
    )
    for sink, namespace, path, doubt, claim_ends in rows:
        times = [t for t in (doubt, claim_ends + LATE_WRITE if claim_ends else None) if t]
        item = (sink, namespace, path)
        found[item] = max([*times, *([found[item]] if item in found else [])])
    return found


def take_back(
    conn: Connection, *, sink: str, namespace: str, path: str, now: datetime | None
) -> None:
    """A copy of the item landed in ``sink`` after its namespace was erased: make sure the sink
    ends with the item's current state. The newest row of the item is a version committed since
    (the user came back): deliver it again. Otherwise queue a tombstone, unless one waits."""
    now = resolve(conn, now)
    latest = conn.execute(
        sa.select(outbox)
        .where(outbox.c.sink == sink, outbox.c.namespace == namespace, outbox.c.path == path)
        .order_by(outbox.c.id.desc())
        .limit(1)
    ).first()
    if latest is not None and latest.kind != "erase":
        conn.execute(
            sa.update(outbox)
            .where(outbox.c.id == latest.id)
            .values(delivered_at=None, next_attempt_at=now, superseded_by=None)
        )
    elif latest is None:
        conn.execute(
            sa.insert(outbox).values(
                file_version_id=None,
                sink=sink,
                kind="erase",
                namespace=namespace,
                path=path,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
            )
        )


def requeue_current(
    conn: Connection, *, namespace: str, sinks: Sequence[str], now: datetime | None
) -> int:
    """Make every current file of ``namespace`` due again for each of ``sinks`` (``memworker
    publish``): a sink added after the memory was merged gets rows for versions committed
    before it existed; a sink that has them gets their newest row delivered again. Returns
    the rows made due.

    The namespace's fence row is locked first (as a commit locks it), so no commit writes a
    newer version meanwhile: a row queued here is always of the current version, never one a
    concurrent commit just superseded.
    """
    now = resolve(conn, now)
    found = conn.execute(
        sa.select(namespaces.c.id).where(namespaces.c.key == namespace).with_for_update()
    ).first()
    if found is None:
        return 0
    current = conn.execute(
        sa.select(memory_files.c.path, file_versions.c.id)
        .join(
            file_versions,
            sa.and_(
                file_versions.c.file_id == memory_files.c.id,
                file_versions.c.version == memory_files.c.current_version,
            ),
        )
        .where(memory_files.c.namespace_id == found.id)
        .order_by(memory_files.c.path)
    ).all()
    queued = 0
    for sink in sinks:
        for path, version_id in current:
            queued += _requeue_item(
                conn, sink=sink, namespace=namespace, path=path, version_id=version_id, now=now
            )
    return queued


def _requeue_item(
    conn: Connection, *, sink: str, namespace: str, path: str, version_id: int, now: datetime
) -> int:
    """Make the current version ``version_id`` of one item due for ``sink``: its row again
    (undelivered, due now, no longer superseded), or a new one when the sink has none."""
    reset = conn.execute(
        sa.update(outbox)
        .where(outbox.c.file_version_id == version_id, outbox.c.sink == sink)
        .values(delivered_at=None, next_attempt_at=now, superseded_by=None, attempts=0)
    )
    if reset.rowcount:
        return 1
    conn.execute(
        sa.insert(outbox).values(
            file_version_id=version_id,
            sink=sink,
            kind="publish",
            namespace=namespace,
            path=path,
            attempts=0,
            next_attempt_at=now,
            created_at=now,
        )
    )
    return 1


def lag(conn: Connection, *, now: datetime | None) -> dict[str, SinkLag]:
    """Per sink: undelivered items (newest row per item) and the oldest one's age."""
    now = resolve(conn, now)
    rows = conn.execute(
        sa.select(outbox.c.sink, sa.func.count(), sa.func.min(outbox.c.created_at))
        .where(outbox.c.delivered_at.is_(None), _is_latest())
        .group_by(outbox.c.sink)
    )
    result: dict[str, SinkLag] = {}
    for sink, count, oldest in rows:
        # min() keeps the column's type, so ``oldest`` is an aware UTC datetime.
        age = max((now - oldest).total_seconds(), 0.0)
        result[sink] = SinkLag(pending=int(count), oldest_age_seconds=age)
    return result


#: The rows :func:`claim` took, with their content (built once).
_CLAIMED: Final = _select_items().where(_claimed_ids()).order_by(outbox.c.id)


class DeliveryMethods(Transactions):
    """Outbox deliveries and sink health (mixed into :class:`~worker.store.memory.MemoryStore`)."""

    def due_outbox(
        self, *, sink: str | None, now: datetime | None = None, limit: int = 100
    ) -> list[OutboxItem]:
        """Deliveries due at ``now`` (of one sink, or all), oldest first."""
        return self._read("reading the outbox", lambda c: due(c, sink=sink, now=now, limit=limit))

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
            lambda c: claim(
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
            self._write("releasing deliveries", lambda c: release(c, ids))

    def outbox_pending(self, *, namespaces: Sequence[str] | None = None) -> int:
        """Undelivered items (newest per item and sink), due or waiting for a retry."""
        return self._read("counting deliveries", lambda c: pending_count(c, namespaces=namespaces))

    def sink_health(self, sink: str | None = None) -> list[SinkHealth]:
        """The breaker of ``sink`` (a healthy default when never seen), or of every sink seen."""
        if sink is None:
            return self._read("reading sink health", read_all)
        return [self._read("reading sink health", lambda c: read(c, sink))]

    def record_sink_failure(
        self, sink: str, error: str, *, now: datetime | None = None, namespace: str | None = None
    ) -> SinkHealth:
        """Count a failed delivery (of ``namespace``) toward the sink's breaker."""
        return self._write(
            "recording a sink failure",
            lambda c: record_failure(c, sink, error, now=now, namespace=namespace),
        )

    def record_sink_success(self, sink: str, *, now: datetime | None = None) -> None:
        self._write("recording a sink success", lambda c: record_success(c, sink, now=now))

    def mark_delivered(self, outbox_id: int, *, now: datetime | None = None) -> None:
        self._write("marking a delivery", lambda c: mark_delivered(c, outbox_id, now=now))

    def mark_delivered_unless_erased(
        self, outbox_id: int, *, namespace: str, generation: int, now: datetime | None = None
    ) -> bool:
        """Mark a delivery unless ``namespace``'s erase generation moved on from
        ``generation`` (False: nothing marked), in one transaction."""
        return self._write(
            "marking a delivery",
            lambda c: mark_delivered_unless_erased(
                c, outbox_id, namespace=namespace, generation=generation, now=now
            ),
        )

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
            lambda c: mark_failed(
                c, outbox_id, error, next_attempt_at=next_attempt_at, retry_in=retry_in, now=now
            ),
        )

    def outbox_lag(self, *, now: datetime | None = None) -> dict[str, SinkLag]:
        """Per sink: pending deliveries and the age in seconds of the oldest."""
        return self._read("measuring outbox lag", lambda c: lag(c, now=now))

    def requeue_current(
        self, namespace: str, *, sinks: Sequence[str], now: datetime | None = None
    ) -> int:
        """Make ``namespace``'s current files due again for ``sinks``; returns the rows made
        due (see :func:`worker.store.outbox.requeue_current`)."""
        return self._write(
            f"queueing {namespace}'s files again",
            lambda c: requeue_current(c, namespace=namespace, sinks=sinks, now=now),
        )

    def take_back(
        self, *, sink: str, namespace: str, path: str, now: datetime | None = None
    ) -> None:
        """Make ``sink`` end with the item's current state after an erased copy landed there
        (see :func:`worker.store.outbox.take_back`)."""
        self._write(
            "taking a delivery back",
            lambda c: take_back(c, sink=sink, namespace=namespace, path=path, now=now),
        )


#: Failures in a row that open the breaker: enough that one flaky request does not, few enough
#: that a dead sink is noticed within one delivery pass.
BREAKER_THRESHOLD: Final = 3
#: How long the breaker first stays open; doubles with each failed probe.
BREAKER_FIRST_OPEN_SECONDS: Final = 15.0
#: Longest the breaker stays open, so a sink back from an outage is found within it.
BREAKER_MAX_OPEN_SECONDS: Final = 300.0


def open_for(consecutive_failures: int) -> timedelta:
    """How long the breaker stays open after this many failures in a row (0 when closed).

    >>> open_for(2), open_for(3), open_for(4), open_for(40)
    (datetime.timedelta(0), datetime.timedelta(seconds=15), datetime.timedelta(seconds=30), \
datetime.timedelta(seconds=300))
    """
    if consecutive_failures < BREAKER_THRESHOLD:
        return timedelta(0)
    doublings = min(consecutive_failures - BREAKER_THRESHOLD, 16)
    seconds = min(BREAKER_FIRST_OPEN_SECONDS * 2**doublings, BREAKER_MAX_OPEN_SECONDS)
    return timedelta(seconds=seconds)


def read(conn: Connection, sink: str) -> SinkHealth:
    """The sink's breaker; a sink never seen is healthy."""
    row = conn.execute(sa.select(sink_health).where(sink_health.c.sink == sink)).first()
    if row is None:
        return SinkHealth(sink=sink)
    return _health(row)


def read_all(conn: Connection) -> list[SinkHealth]:
    """Every sink with a recorded outcome, by name."""
    rows = conn.execute(sa.select(sink_health).order_by(sink_health.c.sink))
    return [_health(r) for r in rows]


def record_failure(
    conn: Connection, sink: str, error: str, *, now: datetime | None, namespace: str | None = None
) -> SinkHealth:
    """Count one more failure in a row; opens (or re-opens) the breaker past the threshold.
    A failure of the same ``namespace`` as the last one only updates the error."""
    now = resolve(conn, now)
    current = conn.execute(
        sa.select(sink_health.c.consecutive_failures, sink_health.c.failing_digest).where(
            sink_health.c.sink == sink
        )
    ).first()
    failures = int(current.consecutive_failures) if current is not None else 0
    failing = _commit.digest(namespace) if namespace is not None else None
    values: dict[str, object] = {"last_error": error[:MAX_ERROR_CHARS], "last_failure_at": now}
    if not (failing is not None and failures and current and current.failing_digest == failing):
        # Another namespace failed (or none was named): one more failure in a row.
        window = open_for(failures + 1)
        values |= {
            "consecutive_failures": failures + 1,
            "open_until": now + window if window else None,
            "failing_digest": failing,
        }
    _upsert(conn, sink, values)
    return read(conn, sink)


def record_success(conn: Connection, sink: str, *, now: datetime | None) -> None:
    """Close the breaker: the sink answered."""
    now = resolve(conn, now)
    _upsert(
        conn,
        sink,
        {
            "consecutive_failures": 0,
            "open_until": None,
            "last_error": None,
            "last_success_at": now,
            "failing_digest": None,
        },
    )


def _upsert(conn: Connection, sink: str, values: Mapping[str, object]) -> None:
    insert = dialect_insert(conn, sink_health).values(sink=sink, **values)
    conn.execute(insert.on_conflict_do_update(index_elements=["sink"], set_=values))


def _health(row: sa.Row[tuple[object, ...]]) -> SinkHealth:
    m = row._mapping
    return SinkHealth(
        sink=str(m["sink"]),
        consecutive_failures=int(m["consecutive_failures"]),
        open_until=m["open_until"],
        last_error=m["last_error"],
        last_failure_at=m["last_failure_at"],
        last_success_at=m["last_success_at"],
    )
