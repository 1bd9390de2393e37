"""The operators' side of the queue: what is queued, dead letters, purges, deployment facts.

The worker's side, the batch lifecycle (enqueue, claim, read, extend, ack, fail), is
:class:`~worker.queue.redis_queue.RedisQueue`, which hands this out as ``queue.admin``. Reads
here are plain pipelined reads: snapshots for people, never decisions. The writes (retry or
drop a dead letter, purge a namespace) are scripts that check their own preconditions.

Example (needs a Redis server)::

    admin = RedisQueue(redis.Redis(), settings.for_queue).admin
    admin.stats().pending           # candidates waiting, all scopes
    for letter in admin.dead_letters():
        admin.retry_dead(letter.namespace)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

import redis
from redis.cluster import RedisCluster

from worker.errors import BusyNamespace, NotFound
from worker.queue import deployment
from worker.queue.redis import REDIS_FAILURES, RedisClient, is_cluster, translate
from worker.queue.scripts import (
    QueueLayout,
    ScriptRunner,
    collect_stats,
    entries_of,
    s,
    script_now,
    server_ms,
)
from worker.queue.types import DeadLetter, NamespaceQueueState, QueueStats
from worker.types import QueueSettings

if TYPE_CHECKING:
    from worker.models import Candidate


#: Log entries read per XRANGE when looking for one candidate.
LOG_PAGE: Final = 500
#: Page size for SCAN over the namespaces' keys.
SCAN_COUNT: Final = 1000


class QueueAdmin:
    """What operators (and the worker's start-up and health checks) do with the queue."""

    def __init__(self, scripts: ScriptRunner, settings: QueueSettings) -> None:
        self._scripts = scripts
        self.redis = scripts.redis
        self.layout = scripts.layout
        self.settings = settings

    # --- what is queued ----------------------------------------------------------------------
    def pending(self, namespace: str, limit: int = 1000) -> list[tuple[str, Candidate]]:
        """Up to ``limit`` queued candidates of ``namespace``, oldest first (leased ones too)."""
        return entries_of(self.redis.xrange(self.layout.log(namespace), "-", "+", count=limit))

    def namespace_state(self, namespace: str, *, now: float | None = None) -> NamespaceQueueState:
        """Pending count, lease and dead-letter state of ``namespace``, in one round trip.

        A snapshot for operators: a worker may claim or ack the namespace right after.
        Leases are judged by the Redis server's clock (``now`` is a test hook).
        """
        return namespace_state(self.redis, self.layout, namespace, now)

    def find_queued(
        self, candidate_id: str, namespaces: Iterable[str]
    ) -> tuple[str, str, Candidate] | None:
        """``(namespace, stream id, candidate)`` of ``candidate_id`` if one of ``namespaces``'
        logs still holds it (queued, due, leased or dead-lettered), else None.

        Reads each log a page at a time and decodes only the entries whose payload names the
        id, so looking through a large queue costs reads, not decoding."""
        needle = candidate_id.encode()
        for namespace in namespaces:
            start = "-"
            while True:
                page = self.redis.xrange(self.layout.log(namespace), start, "+", count=LOG_PAGE)
                for stream_id, fields in page or ():
                    payload = (fields or {}).get(b"c", (fields or {}).get("c"))
                    raw = payload.encode() if isinstance(payload, str) else payload
                    if raw is None or needle not in raw:
                        continue  # not this candidate: left undecoded
                    for sid, candidate in entries_of([(stream_id, fields)]):
                        if candidate.id == candidate_id:
                            return namespace, sid, candidate
                if not page or len(page) < LOG_PAGE:
                    break
                start = "(" + s(page[-1][0])
        return None

    def due_at_ms(self, namespace: str) -> int | None:
        """When ``namespace`` is due to be merged (epoch ms, the Redis server's clock), or None
        when it is not in its shard's due set (nothing pending)."""
        score = self.redis.zscore(self.layout.due(self.layout.shard(namespace)), namespace)
        return None if score is None else int(score)

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
            raise translate(exc, self._scripts.where) from exc

    # --- dead letters and forgetting ---------------------------------------------------------
    def dead_letters(self) -> list[DeadLetter]:
        """Every dead-lettered namespace, longest dead first."""
        return dead_letters(self.redis, self.layout)

    def retry_dead(self, namespace: str, *, now: float | None = None) -> bool:
        """Bring a dead-lettered namespace back with a fresh attempt count; due now.

        False when it is not dead-lettered.
        """
        return bool(self._scripts.run("dlq_retry", now=script_now(now), namespace=namespace))

    def drop_dead(self, namespace: str) -> int:
        """Delete a dead-lettered namespace's pending candidates; returns how many.

        Raises :class:`~worker.errors.NotFound` when it is not dead-lettered, so a typo can
        never drop a healthy namespace's queue.
        """
        dropped = int(self._scripts.run("dlq_drop", namespace=namespace))
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
        erased = int(self._scripts.run("purge", namespace=namespace, now=script_now(now)))
        if erased < 0:
            raise BusyNamespace(
                f"{namespace} is being consolidated by a worker right now; nothing of it was "
                "erased. Run forget again in a minute, once that batch is done"
            )
        return erased

    # --- the deployment ----------------------------------------------------------------------
    def publish_policy(self) -> None:
        """Write this deployment's debounce, max wait and backlog limit into Redis, where the
        enqueue script reads them (worker start; see :mod:`worker.queue.deployment`)."""
        deployment.publish_policy(self.redis, self.layout, self.settings)

    def record_sinks(self, sinks: Sequence[str]) -> None:
        """Record the sinks the workers publish to (worker start; see
        :mod:`worker.queue.deployment`)."""
        deployment.record_sinks(self.redis, self.layout, sinks)

    def workers_sinks(self) -> list[str] | None:
        """The sinks the workers recorded at start; None when none did."""
        return deployment.recorded_sinks(self.redis, self.layout)

    def check_durability(self) -> deployment.Durability:
        """Refuse an evicting Redis unless overridden; warn about no AOF (worker start)."""
        return deployment.check_durability(self.redis, self.settings)

    def durability(self) -> deployment.Durability:
        """Redis's persistence settings and their risks, for ``memworker status``."""
        return deployment.read_durability(self.redis)

    def cluster_primaries(self) -> int | None:
        """How many primaries serve the queue when it is a Redis Cluster; None on one node."""
        if not isinstance(self.redis, RedisCluster):
            return None
        return len(self.redis.get_primaries())  # type: ignore[no-untyped-call]

    def epochs(self) -> dict[int, str | None]:
        """Each shard's queue epoch (None: no claim since Redis started empty)."""
        return epochs(self.redis, self.layout)

    def last_issued(self, namespaces: Sequence[str]) -> dict[str, tuple[int, int]]:
        """The highest stream id issued to each namespace (see :func:`last_issued`)."""
        return last_issued(self.redis, self.layout, list(namespaces))


#: Dead letters read per pipelined round trip.
PAGE: Final = 1000


def namespace_state(
    client: RedisClient, layout: QueueLayout, namespace: str, now: float | None
) -> NamespaceQueueState:
    """See :meth:`QueueAdmin.namespace_state`."""
    pipe = client.pipeline(transaction=False)
    pipe.hmget(layout.meta(namespace), "token", "lease_until", "dead", "attempts", "lease_from")
    pipe.hget(layout.meta(namespace), "last_error")
    pipe.xlen(layout.log(namespace))
    pipe.exists(layout.meta(namespace), layout.log(namespace))
    clustered = is_cluster(client)
    if not clustered:  # a cluster refuses keyless commands in a pipeline
        pipe.time()
    try:
        (token, until, dead, attempts, since), last_error, pending, exists, *t = pipe.execute()
        if clustered:
            t = [client.time()]
    except REDIS_FAILURES as exc:
        raise translate(exc, "the queue's Redis") from exc
    at_ms = server_ms(t[0]) if now is None else int(now * 1000)
    return NamespaceQueueState(
        namespace=namespace,
        known=bool(exists),
        pending=int(pending),
        leased=token is not None and lease_holds(at_ms, since, until),
        dead=dead is not None,
        attempts=int(attempts or 0),
        last_error=s(last_error) if last_error is not None else None,
    )


def lease_holds(now_ms: int, since: bytes | str | None, until: bytes | str | None) -> bool:
    """Whether a lease term from ``since`` to ``until`` (ms) still holds at ``now_ms``: the
    queue scripts' rule (``_sets.lua``'s ``lease_holds``), which survives a step of the
    server's clock. A lease without ``since`` (set before it was recorded) holds until
    ``until``.

    >>> lease_holds(1_000, b"900", b"1100"), lease_holds(1_100, b"900", b"1100")
    (True, False)
    >>> lease_holds(690, b"900", b"1100"), lease_holds(710, b"900", b"1100")  # stepped back
    (False, True)
    """
    if until is None:
        return False
    end = int(until)
    if now_ms >= end:
        return False
    return since is None or now_ms >= 2 * int(since) - end


def dead_letters(client: RedisClient, layout: QueueLayout) -> list[DeadLetter]:
    """Every dead-lettered namespace, longest dead first."""
    pipe = client.pipeline(transaction=False)
    for shard in range(layout.shards):
        pipe.zrange(layout.dead(shard), 0, -1, withscores=True)
    dead = [(s(ns), score) for rows in pipe.execute() for ns, score in rows]
    letters: list[DeadLetter] = []
    for start in range(0, len(dead), PAGE):
        chunk = dead[start : start + PAGE]
        pipe = client.pipeline(transaction=False)
        for ns, _ in chunk:
            pipe.hmget(layout.meta(ns), "attempts", "last_error")
            pipe.xlen(layout.log(ns))
        replies = pipe.execute()
        for i, (ns, since) in enumerate(chunk):
            attempts, last_error = replies[2 * i]
            letters.append(
                DeadLetter(
                    namespace=ns,
                    attempts=int(attempts or 0),
                    last_error=s(last_error) if last_error is not None else None,
                    pending=int(replies[2 * i + 1]),
                    dead_since=datetime.fromtimestamp(since / 1000, UTC),
                )
            )
    return sorted(letters, key=lambda d: d.dead_since)


def epochs(client: RedisClient, layout: QueueLayout) -> dict[int, str | None]:
    """Each shard's epoch, or None where no claim has created one yet."""
    pipe = client.pipeline(transaction=False)  # one GET per shard: the shards' slots differ
    for shard in range(layout.shards):
        pipe.get(layout.epoch(shard))
    values = pipe.execute()
    return {shard: None if v is None else s(v) for shard, v in enumerate(values)}


def last_issued(
    client: RedisClient, layout: QueueLayout, namespaces: list[str]
) -> dict[str, tuple[int, int]]:
    """The highest stream id this Redis has issued to each namespace, as ``(ms, seq)``: its
    meta's ``lms``/``lseq`` or, once it was emptied and forgotten, its shard's id floor (raised
    to every forgotten namespace's last id). Ids only grow, so an applied position above it in
    the same epoch means Redis was rolled back to an older snapshot."""
    pipe = client.pipeline(transaction=False)
    for ns in namespaces:
        pipe.hmget(layout.meta(ns), "lms", "lseq")
        pipe.hmget(layout.stats(layout.shard(ns)), "floor_ms", "floor_seq")
    replies = pipe.execute()
    found = {}
    for i, ns in enumerate(namespaces):
        (lms, lseq), (fms, fseq) = replies[2 * i], replies[2 * i + 1]
        mine = (int(lms), int(lseq or 0)) if lms is not None else (0, 0)
        floor = (int(fms), int(fseq or 0)) if fms is not None else (0, 0)
        found[ns] = max(mine, floor)
    return found
