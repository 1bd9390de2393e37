"""What the queue reports to operators: dead letters, one namespace's state and statistics.

What a claim is, and what stream ids and epochs mean, is the batch lifecycle's
(:mod:`worker.queue.redis_queue`).

>>> QueueStats(scopes={"user": ScopeStats(pending=2, due=1)}).total.pending
2
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime


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
