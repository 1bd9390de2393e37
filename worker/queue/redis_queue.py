"""The durable debounced queue, the worker's side: a batch's lifecycle (claim, read, extend,
ack, fail), the sweep, and the claims it hands out. The queue owns the format of stream ids and
epochs: the service asks a claim, it parses no stream id.

>>> c = Claim(namespace="user:u1", token=3, covered="1700000000000-0", count=2, attempts=0)
>>> c.token, c.position
(3, '/1700000000000-0')

Life of a namespace's batch::

    enqueue ──► waiting ──(due time passes)──► due ──claim──► leased ──ack──► gone
                  ▲  debounce: due = min(last + quiet, first + max_wait)     │
                  └──────── fail (backoff) / release / lease expiry ◄───────┘
                                   └─ max_attempts reached ──► dead (kept, listable)

Invariants the scripts keep:

- At most one lease per namespace; a namespace due while leased is parked until the lease ends.
- A lease's ``token`` only grows (a fencing number): ``ack``, ``extend``, ``fail`` and
  ``release`` with a stale token change nothing.
- ``ack`` removes exactly the entries the claim covered; candidates that arrived during the
  lease stay and re-arm the due time from their own arrivals.
- Candidates are never dropped by failure: a dead-lettered namespace keeps them until an
  operator retries or drops them.
- A namespace's keys share a hash tag, so each script touches one Redis Cluster slot.

The clock is the Redis server's: every script reads ``TIME`` itself. Methods take ``now``
(epoch seconds) only as a test hook; production callers leave it out.

Example (needs a Redis server)::

    queue = RedisQueue(redis.Redis(), settings.for_queue)
    queue.enqueue(make_candidate(user_id="u1", trace_id="t1", text="I prefer tea"))
    for claim in queue.claim_due():
        batch = queue.read_batch(claim)      # [(stream id, Candidate), ...]
        ...                                  # merge, commit (heartbeat: queue.extend(claim))
        queue.ack(claim)                     # or queue.fail(claim, "why")

The operators' side is ``queue.admin``, a :class:`~worker.queue.admin.QueueAdmin` on the same
client.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from worker.errors import MAX_ERROR_CHARS, InvalidCandidate
from worker.metrics import count_enqueued
from worker.queue.admin import QueueAdmin
from worker.queue.redis import REDIS_FAILURES, RedisClient, translate
from worker.queue.scripts import (
    SCRIPTS,
    Call,
    EnqueueEncoder,
    QueueLayout,
    ScriptRunner,
    call_script,
    enqueue_error,
    entries_of,
    run_pipeline,
    s,
    script_now,
    seconds_to_ms,
)
from worker.queue.types import DeadLetter, QueueStats
from worker.types import QueueSettings

if TYPE_CHECKING:
    from worker.models import Candidate

__all__ = ["Claim", "DeadLetter", "QueueStats", "RedisQueue"]


#: Longest delay between retries of a failing batch, whatever the attempt count: an hour keeps
#: a flapping dependency from pushing a user's memories back by days.
MAX_RETRY_DELAY_SECONDS: Final = 3600.0


log = logging.getLogger(__name__)


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

    "Newer wins" for a key goes by ``created_at``; the server's arrival time there makes that
    the queue's arrival order, so a chat host whose clock is off cannot make its value win or
    lose. An ``occurred_at`` after the arrival is clamped to it for the same reason. Entries
    without a stream id (a preview's extra candidates) keep their own stamps.
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


def claims_of_shards(results: list[Any]) -> list[Claim]:
    """Claims of every shard that answered. A shard's error is logged, not raised, unless all
    failed: raising would orphan the leases the other shards just granted."""
    claims: list[Claim] = []
    errors = [r for r in results if isinstance(r, Exception)]
    for result in results:
        if not isinstance(result, Exception):
            claims.extend(claims_of(result))
    if errors and len(errors) == len(results):
        raise errors[0]
    for error in errors:
        log.error("claiming one queue shard failed: %s", error)
    return claims


def claims_of(result: Any) -> list[Claim]:
    """The claims one ``claim`` script call granted."""
    if isinstance(result, Exception):
        raise result
    return [
        Claim(
            namespace=s(ns),
            token=int(token),
            covered=s(covered),
            count=int(count),
            attempts=int(n),
            due_at_ms=int(due),
            epoch=s(epoch),
        )
        for ns, token, covered, count, n, due, epoch in result
    ]


class RedisQueue:
    """The worker's side of the queue: a namespace batch's lifecycle (the hot path's side is
    :class:`worker.MemoryClient`, the operators' is :attr:`admin`).

    ``redis`` may or may not decode responses; the queue handles both. It may be a single node
    or a :class:`~redis.cluster.RedisCluster` (see :mod:`worker.queue.redis`).
    """

    def __init__(self, redis: RedisClient, settings: QueueSettings) -> None:
        self.redis = redis
        self.settings = settings
        self.layout = QueueLayout(settings.key_prefix, settings.queue_shards)
        self._scripts = ScriptRunner(redis, self.layout)
        #: The operators' side of this queue: what is queued, dead letters, the deployment.
        self.admin = QueueAdmin(self._scripts, settings)
        self._encoder = EnqueueEncoder(settings)
        self._where = self._scripts.where
        self._lease_ms = seconds_to_ms(settings.lease_seconds)
        #: The workers' policy, sent to the scripts that read it (used where Redis lost it).
        self._policy = settings.queue_policy.packed()
        self._backoff_ms = seconds_to_ms(settings.retry_backoff_seconds)
        self._max_delay_ms = seconds_to_ms(MAX_RETRY_DELAY_SECONDS)
        # Where a bounded claim_due starts, so a small limit does not always favour shard 0.
        self._next_shard = itertools.count()
        # The shards the last peek found with work that bounded claims have not drained yet
        # (see claim_due), and the lock that keeps threads sharing this queue from taking the
        # same one off twice.
        self._ready: list[int] = []
        self._ready_lock = threading.Lock()

    # --- hot path ----------------------------------------------------------------------------
    def enqueue(self, candidate: Candidate, *, now: float | None = None) -> str:
        """Append ``candidate`` to its namespace's log; returns the stream id. One round trip.

        Raises :class:`~worker.errors.BacklogFull` when the namespace is at its pending limit.
        """
        script, keys, args = self._encoder.call(candidate, now)
        try:
            stream_id = s(call_script(self.redis, script, keys, args))
        except REDIS_FAILURES as exc:
            raise enqueue_error(candidate.namespace, exc, self._where) from None
        count_enqueued(candidate.namespace)
        return stream_id

    def enqueue_many(
        self, candidates: Sequence[Candidate], *, now: float | None = None
    ) -> list[str]:
        """Enqueue many candidates in one pipelined round trip; returns their stream ids.

        If some are refused (a full backlog), the others are still enqueued and the first
        refusal is raised.
        """
        calls = [self._encoder.call(c, now) for c in candidates]
        try:
            results = run_pipeline(self.redis, calls)
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc
        self._encoder.settle(candidates, results, self._where)  # names each refusal
        return [s(r) for r in results]

    # --- claiming ----------------------------------------------------------------------------
    def claim_due(self, *, now: float | None = None, limit: int | None = None) -> list[Claim]:
        """Lease every due namespace (and every expired lease), up to ``claim_limit`` per shard.

        With ``limit``, at most that many in total, visiting the shards that have work in turn
        (one round trip each; which shards have work, a pipelined peek at every shard finds,
        see :meth:`_claim_ready`); without it, all shards in one pipelined round trip.
        """
        now_ms = script_now(now)
        shards = self.settings.queue_shards
        if limit is None:
            calls = [
                self._claim_call(i, now_ms, self.settings.claim_limit, "") for i in range(shards)
            ]
            return claims_of_shards(self._scripts.pipeline(calls))
        with self._ready_lock:
            return self._claim_ready(now_ms, limit)

    def _claim_ready(self, now_ms: str | int, limit: int) -> list[Claim]:
        """Bounded claims from the shards a peek found with work, kept across calls: a shard
        leaves the list once a claim there takes fewer than it asked for (nothing more was
        due), and a call whose list runs dry peeks again, once. So a worker taking a few
        claims at a time peeks about once per pass over the shards with work, not per call.
        """
        claims: list[Claim] = []
        peeked = False
        while len(claims) < limit:
            if not self._ready:
                if peeked:
                    break
                self._ready = self._ready_shards(next(self._next_shard), now_ms)
                peeked = True
                continue
            wanted = limit - len(claims)
            taken = claims_of(
                self._scripts.call(*self._claim_call(self._ready[0], now_ms, wanted, ""))
            )
            claims.extend(taken)
            if len(taken) < wanted:
                self._ready.pop(0)
        return claims

    def _ready_shards(self, start: int, now_ms: str | int) -> list[int]:
        """The shards with a namespace due or a lease expired at ``now_ms`` (``""``: the
        server's clock), in turn from ``start``.

        One pipelined peek at each shard's earliest due time and lease expiry, so a bounded
        claim runs the claim script only where there is work, not on every shard in turn (a
        round trip each). The peek only narrows the visit: the claim script decides on its
        own clock, and a shard that becomes due after the peek is found by the next sweep.
        """
        shards = self.settings.queue_shards
        order = [(start + i) % shards for i in range(shards)]
        try:
            pipe = self.redis.pipeline(transaction=False)
            for shard in order:
                pipe.zrange(self.layout.due(shard), 0, 0, withscores=True)
                pipe.zrange(self.layout.leases(shard), 0, 0, withscores=True)
            heads = pipe.execute()
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc
        at = self._scripts.server_ms() if now_ms == "" else int(now_ms)
        return [
            shard
            for k, shard in enumerate(order)
            if any(score <= at for _, score in (*heads[2 * k], *heads[2 * k + 1]))
        ]

    def claim_namespace(self, namespace: str, *, now: float | None = None) -> Claim | None:
        """Lease ``namespace``'s batch now, due or not (reconcile by hand).

        None when it has nothing pending, is leased by someone else (it is then parked until
        that lease ends) or is dead-lettered.
        """
        call = self._claim_call(self.layout.shard(namespace), script_now(now), 1, namespace)
        claims = claims_of(self._scripts.call(*call))
        return claims[0] if claims else None

    def read_batch(self, claim: Claim) -> list[tuple[str, Candidate]]:
        """The claimed candidates as ``(stream id, candidate)``, in arrival order."""
        try:
            raw = self.redis.xrange(
                self.layout.log(claim.namespace), "-", claim.covered, count=claim.count
            )
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc
        batch = entries_of(raw)
        for stream_id, candidate in batch:
            # Keys are per namespace, so this cannot happen unless Redis was written to by hand;
            # checked anyway because mixing two users' memories is the one unrecoverable bug.
            if candidate.namespace != claim.namespace:
                raise InvalidCandidate(
                    f"log entry {stream_id} of {claim.namespace} belongs to {candidate.namespace}; "
                    "refusing the batch"
                )
        return batch

    def extend(self, claim: Claim, *, now: float | None = None) -> bool:
        """Heartbeat: push the lease's expiry to now + lease. False when the lease was lost."""
        return bool(
            self._scripts.run(
                "extend",
                now=script_now(now),
                lease_ms=self._lease_ms,
                token=claim.token,
                namespace=claim.namespace,
            )
        )

    def ack(self, claim: Claim, *, now: float | None = None) -> bool:
        """The batch is committed: drop the entries it covered. False for a stale token, or a
        lease that covers other entries than ``claim`` (an ack only trims its own lease's)."""
        removed = self._scripts.run(
            "ack",
            now=script_now(now),
            token=claim.token,
            namespace=claim.namespace,
            covered=claim.covered,
            policy=self._policy,
        )
        return int(removed) >= 0

    def fail(
        self, claim: Claim, error: str, *, now: float | None = None
    ) -> Literal["retry", "dead", "stale"]:
        """Count a failed attempt: retry after a backoff, or dead-letter at ``max_attempts``.

        The backoff is ``retry_backoff_seconds * 2 ** (attempts - 1)``, at most an hour.
        """
        verdict = self._settle(claim, "fail", error[:MAX_ERROR_CHARS], now)
        if verdict not in ("retry", "dead", "stale"):  # pragma: no cover - script contract
            raise RuntimeError(f"settle script answered {verdict!r}")
        return verdict  # type: ignore[return-value]

    def outage(self, claim: Claim, error: str, *, now: float | None = None) -> bool:
        """A dependency was unreachable (not the batch's fault): retry after a capped backoff,
        without counting an attempt, so an outage never dead-letters anything.

        False when the lease had already moved on.
        """
        return self._settle(claim, "outage", error[:MAX_ERROR_CHARS], now) == "retry"

    def release(self, claim: Claim, *, now: float | None = None) -> bool:
        """Give the lease back without counting an attempt (shutdown); the batch is due now."""
        return self._settle(claim, "release", "", now) == "released"

    # --- making due ------------------------------------------------------------------------
    def mark_due(self, namespace: str, *, now: float | None = None) -> bool:
        """Make ``namespace`` due now, debounce or not; if leased, due when its lease ends.

        False when it has nothing pending or is dead-lettered (see
        :meth:`~worker.queue.admin.QueueAdmin.retry_dead`).
        """
        return bool(self._scripts.run("mark_due", now=script_now(now), namespace=namespace))

    def server_ms(self) -> int:
        """The Redis server's clock (epoch ms): the queue's only clock."""
        return self._scripts.server_ms()

    # --- internals ---------------------------------------------------------------------------
    def _claim_call(self, shard: int, now_ms: str | int, limit: int, namespace: str) -> Call:
        return SCRIPTS["claim"].bind(
            self.layout,
            shard,
            now=now_ms,
            lease_ms=self._lease_ms,
            max_batch=self.settings.max_batch,
            limit=limit,
            max_attempts=self.settings.max_attempts,
            base=self.layout.base(shard),
            namespace=namespace,
            policy=self._policy,
        )

    def _settle(self, claim: Claim, mode: str, error: str, now: float | None) -> str:
        verdict = self._scripts.run(
            "settle",
            now=script_now(now),
            token=claim.token,
            namespace=claim.namespace,
            mode=mode,
            error=error,
            max_attempts=self.settings.max_attempts,
            backoff_ms=self._backoff_ms,
            max_delay_ms=self._max_delay_ms,
            outage_max_ms=seconds_to_ms(self.settings.outage_retry_max_seconds),
        )
        return s(verdict)


def sweep_due(
    queue: RedisQueue, dispatch: Callable[[Claim], None], *, now: float | None = None
) -> list[Claim]:
    """Claim due namespaces and dispatch each claim; a claim that cannot be dispatched is
    released at once (due again) rather than waiting for its lease to expire."""
    claims = queue.claim_due(now=now)
    dispatched = []
    for claim in claims:
        try:
            dispatch(claim)
        except Exception:
            log.exception("could not dispatch %s; releasing its claim", claim.namespace)
            queue.release(claim, now=now)
        else:
            dispatched.append(claim)
    return dispatched
