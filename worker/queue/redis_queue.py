"""The durable debounced queue: candidates per namespace in Redis, claimed in leased batches.

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
(epoch seconds) only as a test hook; production callers leave it out and send no clock.

Example (needs a Redis server)::

    queue = RedisQueue(redis.Redis(), settings.for_queue)
    queue.enqueue(make_candidate(user_id="u1", trace_id="t1", text="I prefer tea"))
    for claim in queue.claim_due():
        batch = queue.read_batch(claim)      # [(stream id, Candidate), ...]
        ...                                  # merge, commit (heartbeat: queue.extend(claim))
        queue.ack(claim)                     # or queue.fail(claim, "why")
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import redis
from redis.cluster import RedisCluster

from worker.errors import MAX_ERROR_CHARS, BusyNamespace, InvalidCandidate, NotFound
from worker.metrics import count_enqueued
from worker.queue import deployment, views
from worker.queue.connect import REDIS_FAILURES, RedisClient
from worker.queue.encoding import (
    EnqueueEncoder,
    enqueue_error,
    script_now,
    seconds_to_ms,
)
from worker.queue.failures import translate, where_of
from worker.queue.keys import QueueLayout
from worker.queue.replies import claims_of, claims_of_shards, entries_of, s
from worker.queue.scripts import SCRIPTS, Args, Call, LuaScript, Value, run_pipeline
from worker.queue.stats import collect_stats, server_ms
from worker.queue.types import Claim, DeadLetter, NamespaceQueueState, QueueStats
from worker.slices import QueueSettings

if TYPE_CHECKING:
    from worker.models import Candidate

#: Longest delay between retries of a failing batch, whatever the attempt count: an hour keeps
#: a flapping dependency from pushing a user's memories back by days.
MAX_RETRY_DELAY_SECONDS: Final = 3600.0

#: Page size for SCAN and for pipelined reads over many namespaces.
SCAN_COUNT: Final = 1000

__all__ = ["Claim", "DeadLetter", "QueueStats", "RedisQueue"]

log = logging.getLogger(__name__)


class RedisQueue:
    """The worker's side of the queue (the hot path's side is :class:`worker.MemoryClient`).

    ``redis`` may or may not decode responses; the queue handles both. It may be a single node
    or a :class:`~redis.cluster.RedisCluster` (see :mod:`worker.queue.connect`).
    """

    def __init__(self, redis: RedisClient, settings: QueueSettings) -> None:
        self.redis = redis
        self.settings = settings
        self.layout = QueueLayout(settings.key_prefix, settings.queue_shards)
        self._encoder = EnqueueEncoder(settings)
        self._where = where_of(redis)
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
            stream_id = s(script.call(self.redis, keys, args))
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
            return claims_of_shards(self._pipeline(calls))
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
            taken = claims_of(self._call(*self._claim_call(self._ready[0], now_ms, wanted, "")))
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
        at = self.server_ms() if now_ms == "" else int(now_ms)
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
        claims = claims_of(self._call(*call))
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
            self._run(
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
        removed = self._run(
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

    # --- operators ---------------------------------------------------------------------------
    def mark_due(self, namespace: str, *, now: float | None = None) -> bool:
        """Make ``namespace`` due now, debounce or not; if leased, due when its lease ends.

        False when it has nothing pending or is dead-lettered (see :meth:`retry_dead`).
        """
        return bool(self._run("mark_due", now=script_now(now), namespace=namespace))

    def pending(self, namespace: str, limit: int = 1000) -> list[tuple[str, Candidate]]:
        """Up to ``limit`` queued candidates of ``namespace``, oldest first (leased ones too)."""
        return entries_of(self.redis.xrange(self.layout.log(namespace), "-", "+", count=limit))

    def namespace_state(self, namespace: str, *, now: float | None = None) -> NamespaceQueueState:
        """Pending count, lease and dead-letter state of ``namespace``, in one round trip.

        A snapshot for operators: a worker may claim or ack the namespace right after.
        Leases are judged by the Redis server's clock (``now`` is a test hook).
        """
        return views.namespace_state(self.redis, self.layout, namespace, now)

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead-lettered namespace, longest dead first."""
        return views.dead_letters(self.redis, self.layout)

    def server_ms(self) -> int:
        """The Redis server's clock (epoch ms): the queue's only clock."""
        return server_ms(self._call_time())

    def last_issued(self, namespaces: Sequence[str]) -> dict[str, tuple[int, int]]:
        """The highest stream id issued to each namespace (see :func:`views.last_issued`)."""
        return views.last_issued(self.redis, self.layout, list(namespaces))

    def epochs(self) -> dict[int, str | None]:
        """Each shard's queue epoch (None: no claim since Redis started empty)."""
        return views.epochs(self.redis, self.layout)

    def publish_policy(self) -> None:
        """Write this deployment's debounce, max wait and backlog limit into Redis, where the
        enqueue script reads them (worker start; see :mod:`worker.queue.deployment`)."""
        deployment.publish_policy(self.redis, self.layout, self.settings)

    def cluster_primaries(self) -> int | None:
        """How many primaries serve the queue when it is a Redis Cluster; None on one node."""
        if not isinstance(self.redis, RedisCluster):
            return None
        return len(self.redis.get_primaries())  # type: ignore[no-untyped-call]

    def check_durability(self) -> deployment.Durability:
        """Refuse an evicting Redis unless overridden; warn about no AOF (worker start)."""
        return deployment.check_durability(self.redis, self.settings)

    def durability(self) -> deployment.Durability:
        """Redis's persistence settings and their risks, for ``memworker status``."""
        return deployment.read_durability(self.redis)

    def retry_dead(self, namespace: str, *, now: float | None = None) -> bool:
        """Bring a dead-lettered namespace back with a fresh attempt count; due now.

        False when it is not dead-lettered.
        """
        return bool(self._run("dlq_retry", now=script_now(now), namespace=namespace))

    def drop_dead(self, namespace: str) -> int:
        """Delete a dead-lettered namespace's pending candidates; returns how many.

        Raises :class:`~worker.errors.NotFound` when it is not dead-lettered, so a typo can
        never drop a healthy namespace's queue.
        """
        dropped = int(self._run("dlq_drop", namespace=namespace))
        if dropped < 0:
            raise NotFound(
                f"namespace {namespace} is not dead-lettered, so nothing was dropped; only dead "
                "letters can be dropped (`memworker status` counts them)"
            )
        return dropped

    def purge_namespace(self, namespace: str, *, now: float | None = None) -> int:
        """Erase everything queued for ``namespace`` (forget a user); returns the count erased.

        Raises :class:`~worker.errors.BusyNamespace` (nothing erased) while a worker holds an
        unexpired lease on it: the check and the erase are one script, so no claim slips in.
        """
        erased = int(self._run("purge", namespace=namespace, now=script_now(now)))
        if erased < 0:
            raise BusyNamespace(
                f"{namespace} is being consolidated by a worker right now; nothing of it was "
                "erased. Run forget again in a minute, once that batch is done"
            )
        return erased

    def namespaces(self) -> Iterator[str]:
        """Every namespace the queue knows (pending or not), each once, in no order."""
        seen: set[str] = set()
        for key in self.redis.scan_iter(match=self.layout.meta_pattern(), count=SCAN_COUNT):
            ns = self.layout.namespace_of_meta(s(key))
            if ns is not None and ns not in seen:
                seen.add(ns)
                yield ns

    def stats(self, *, now: float | None = None) -> QueueStats:
        """Per-scope pending candidates, waiting/due/leased/dead namespaces, oldest pending age.

        Redis unreachable or timing out raises redis-py's own error (``memworker status`` words
        it); any other Redis failure is translated into the error that names it."""
        try:
            return collect_stats(self.redis, self.layout, None if now is None else int(now * 1000))
        except (redis.ConnectionError, redis.TimeoutError):
            raise
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc

    # --- internals ---------------------------------------------------------------------------
    def _run(self, name: str, **args: Value) -> Any:
        """Script ``name`` with ``args`` by name, KEYS derived from its ``namespace``."""
        return self._call(*SCRIPTS[name].bind(self.layout, **args))

    def _call(self, script: LuaScript, keys: Args, args: Args) -> Any:
        """One script call; a Redis failure raised as the MemworkerError that names it."""
        try:
            return script.call(self.redis, keys, args)
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        """Many script calls in one round trip; per-call errors come back translated."""
        try:
            results = run_pipeline(self.redis, calls)
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc
        return [translate(r, self._where) if isinstance(r, Exception) else r for r in results]

    def _call_time(self) -> Any:
        try:
            return self.redis.time()
        except REDIS_FAILURES as exc:
            raise translate(exc, self._where) from exc

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
        verdict = self._run(
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
