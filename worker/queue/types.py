"""What the queue hands out: claims, dead letters and statistics; and what its stream ids and
epochs mean (the queue owns that format: the service asks a claim, it parses no stream id).

>>> c = Claim(namespace="user:u1", token=3, covered="1700000000000-0", count=2, attempts=0)
>>> c.token
3
>>> QueueStats(scopes={"user": ScopeStats(pending=2, due=1)}).total.pending
2
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.models import Candidate

#: Stream position given to candidates that are not in the log (a preview's re-scan): after
#: any applied position, so only the ledger decides whether they are new.
AFTER_EVERYTHING = f"{2**63 - 1}-0"

#: Where stream ids count their milliseconds from.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Arrivals within one millisecond are ordered by their id's sequence number, as microseconds;
#: past 999 in one millisecond (1,000 candidates of one namespace) the order is by id instead.
MAX_SEQ_MICROS = 999


@dataclass(frozen=True)
class Claim:
    """A lease on one namespace's batch: the first ``count`` log entries, up to ``covered``.

    ``token`` is the lease's fencing number, drawn from the shard's counter: it only grows and
    is never issued twice, so an ack or heartbeat carrying another lease's token is refused.
    ``attempts`` counts the batch's earlier failed attempts.
    ``due_at_ms`` is when the namespace became claimable (epoch ms): its debounced due time,
    the expiry of the lease it was taken over from, or the claim time for a namespace claimed
    by name before it was due; the due lag is the claim time minus it. ``None`` for a claim
    serialised by an older release (claims travel through Celery as ``asdict(claim)``).
    ``epoch`` is the queue shard's identity when the claim was made (``None``: an older
    release); a position is only comparable with positions of the same epoch.
    """

    namespace: str
    token: int
    covered: str
    count: int
    attempts: int
    due_at_ms: int | None = None
    epoch: str | None = None

    @property
    def position(self) -> str:
        """Where this batch ends in the queue, as SQL records it: ``<epoch>/<covered>``."""
        return f"{self.epoch or ''}/{self.covered}"

    def check(
        self,
        entries: Sequence[tuple[str, Candidate]],
        recorded: Set[str],
        applied_position: str | None,
    ) -> PositionCheck:
        """What SQL's ``applied_position`` says about the queue this claim was made in, given
        the claim's ``entries`` and which of them the ledger holds (``recorded``): whether
        Redis lost its data since (another epoch), else how many ids it issued again.

        >>> from worker.models import make_candidate
        >>> entries = [("5-0", make_candidate(user_id="u1", trace_id="t", text="I prefer tea"))]
        >>> Claim("user:u1", 1, "5-0", 1, 0, epoch="e2").check(entries, set(), "e1/7-0")
        PositionCheck(applied_position='e1/7-0', recorded_epoch='e1', epoch='e2', reissued=0)
        >>> Claim("user:u1", 1, "5-0", 1, 0, epoch="e1").check(entries, set(), "e1/7-0").reissued
        1
        """
        return PositionCheck(
            applied_position,
            recorded_epoch=epoch_of(applied_position),
            epoch=self.epoch,
            reissued=reissued(entries, recorded, applied_position, self.epoch),
        )


@dataclass(frozen=True)
class PositionCheck:
    """SQL's applied position held against a claim's queue, for the alarms.

    ``epoch_changed``: the position was recorded in another epoch than the claim's, so Redis
    lost its data since (restart without AOF, flush, eviction, failover to a stale replica).
    ``reissued`` (same epoch only, so 0 when it changed): candidates the ledger does not hold
    whose stream ids lie at or below the position, so Redis was rolled back to an older
    snapshot.
    """

    applied_position: str | None
    recorded_epoch: str | None
    epoch: str | None
    reissued: int = 0

    @property
    def epoch_changed(self) -> bool:
        return (
            self.recorded_epoch is not None
            and self.epoch is not None
            and self.recorded_epoch != self.epoch
        )


def epoch_of(position: str | None) -> str | None:
    """The queue epoch an applied position was recorded in (None: none, or from before epochs).

    >>> epoch_of("19a2b3c4d5e6f/1764579000000-3"), epoch_of("1764579000000-3"), epoch_of(None)
    ('19a2b3c4d5e6f', None, None)
    """
    if position is None:
        return None
    epoch, sep, _ = position.rpartition("/")
    return epoch if sep and epoch else None


def applied_stream_position(position: str) -> tuple[int, int]:
    """The stream id of an applied position (``<epoch>/<stream id>``, or a bare stream id from
    before epochs) as ``(ms, seq)``, for comparison with the ids Redis issues.

    >>> applied_stream_position("19a2b3c4d5e6f/1764579000000-3"), applied_stream_position("7-0")
    ((1764579000000, 3), (7, 0))
    """
    return stream_position(position.rpartition("/")[2])


def stream_position(stream_id: str) -> tuple[int, int]:
    """A stream id as ``(ms, seq)``, for comparison.

    >>> stream_position("1764579000000-3") < stream_position("1764579000000-12")
    True
    """
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def arrived(entries: Sequence[tuple[str, Candidate]]) -> list[Candidate]:
    """Each candidate stamped with its arrival on the Redis server (its stream id's ms).

    The consolidator orders candidates and decides "newer wins" for a key by ``created_at``;
    stamping the server's arrival time there makes that the queue's arrival order, so a chat
    host whose clock runs fast or slow cannot make its value win or lose. The client's own
    stamp stays in the queue's log entry. Entries without a stream id (a preview's extra
    candidates) keep theirs. An ``occurred_at`` (the caller's event time, which merging goes
    by) after the arrival is taken as the arrival: nothing was said after it reached the
    queue, so a fast host's event times cannot win over later arrivals either.
    """
    out = []
    for sid, candidate in entries:
        if sid == AFTER_EVERYTHING:
            out.append(candidate)
            continue
        ms, seq = stream_position(sid)
        # The id's sequence number as microseconds keeps arrivals of one millisecond in order.
        at = EPOCH + timedelta(milliseconds=ms, microseconds=min(seq, MAX_SEQ_MICROS))
        update: dict[str, datetime] = {"created_at": at}
        if candidate.occurred_at is not None and candidate.occurred_at > at:
            update["occurred_at"] = at
        out.append(candidate.model_copy(update=update))
    return out


def reissued(
    entries: Sequence[tuple[str, Candidate]],
    recorded: Set[str],
    applied_position: str | None,
    epoch: str | None,
) -> int:
    """How many of ``entries`` that the ledger does not hold (``recorded``) have stream ids at
    or below the applied position of the same ``epoch``: ids a healthy Redis never hands out
    again, since every id at or below that position was committed (and is in the ledger).

    >>> from worker.models import make_candidate
    >>> c = make_candidate(user_id="u1", trace_id="t", text="I prefer tea")
    >>> reissued([("5-0", c), ("9-0", c)], set(), "e1/7-0", "e1")
    1
    >>> reissued([("5-0", c)], set(), "e1/7-0", "e2")
    0
    >>> reissued([("5-0", c)], {c.id}, "e1/7-0", "e1")
    0
    """
    applied_epoch = epoch_of(applied_position)
    if applied_position is None or applied_epoch is None or applied_epoch != epoch:
        return 0
    applied = applied_stream_position(applied_position)
    return sum(
        1
        for sid, c in entries
        if sid != AFTER_EVERYTHING and c.id not in recorded and stream_position(sid) <= applied
    )


@dataclass(frozen=True)
class DeadLetter:
    """A namespace whose batch failed ``attempts`` times; its candidates are kept."""

    namespace: str
    attempts: int
    last_error: str | None
    pending: int
    dead_since: datetime


@dataclass(frozen=True)
class NamespaceQueueState:
    """What the queue holds for one namespace right now (for operators, not for decisions)."""

    namespace: str
    known: bool  #: the queue has (or had, and still tracks) this namespace
    pending: int  #: candidates in its log, a leased batch included
    leased: bool  #: a worker holds an unexpired lease on it
    dead: bool  #: dead-lettered: waits for `memworker dlq retry`
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class ScopeStats:
    """Queue health of one scope (``user``, ``agent``, ``org``).

    A namespace is in exactly one of ``waiting`` (debouncing), ``due`` (ready, waiting for a
    sweep), ``leased`` (a worker has it) or ``dead`` when it has candidates pending.
    """

    pending: int = 0  #: candidates not yet acknowledged (leased batches included)
    waiting: int = 0
    due: int = 0
    leased: int = 0
    dead: int = 0
    oldest_pending_age: float | None = None  #: seconds since the oldest pending arrival

    def __add__(self, other: ScopeStats) -> ScopeStats:
        ages = [a for a in (self.oldest_pending_age, other.oldest_pending_age) if a is not None]
        return ScopeStats(
            pending=self.pending + other.pending,
            waiting=self.waiting + other.waiting,
            due=self.due + other.due,
            leased=self.leased + other.leased,
            dead=self.dead + other.dead,
            oldest_pending_age=max(ages) if ages else None,
        )


@dataclass(frozen=True)
class QueueStats:
    """Per-scope queue health, as ``memworker status`` shows it."""

    scopes: dict[str, ScopeStats] = field(default_factory=dict)

    @property
    def total(self) -> ScopeStats:
        total = ScopeStats()
        for scope in self.scopes.values():
            total = total + scope
        return total

    def as_dict(self) -> dict[str, dict[str, float | int | None]]:
        """JSON-ready: one object per scope plus ``total``."""
        out = {name: asdict(s) for name, s in sorted(self.scopes.items())}
        out["total"] = asdict(self.total)
        return out
