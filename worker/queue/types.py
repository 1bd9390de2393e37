"""What the queue hands out: claims, dead letters and statistics.

>>> c = Claim(namespace="user:u1", token=3, covered="1700000000000-0", count=2, attempts=0)
>>> c.token
3
>>> QueueStats(scopes={"user": ScopeStats(pending=2, due=1)}).total.pending
2
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime


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


def epoch_of(position: str | None) -> str | None:
    """The queue epoch an applied position was recorded in (None: none, or from before epochs).

    >>> epoch_of("19a2b3c4d5e6f/1764579000000-3"), epoch_of("1764579000000-3"), epoch_of(None)
    ('19a2b3c4d5e6f', None, None)
    """
    if position is None:
        return None
    epoch, sep, _ = position.rpartition("/")
    return epoch if sep and epoch else None


def stream_position(stream_id: str) -> tuple[int, int]:
    """A stream id as ``(ms, seq)``, for comparison.

    >>> stream_position("1764579000000-3") < stream_position("1764579000000-12")
    True
    """
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


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
