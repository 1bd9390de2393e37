"""Read-only views of the queue for operators: one namespace, the dead letters, the epochs.

Plain pipelined reads, not scripts: snapshots for people, never decisions.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from worker.queue.connect import REDIS_FAILURES, RedisClient, is_cluster
from worker.queue.failures import translate
from worker.queue.keys import QueueLayout
from worker.queue.replies import s
from worker.queue.stats import server_ms
from worker.queue.types import DeadLetter, NamespaceQueueState

#: Dead letters read per pipelined round trip.
PAGE: Final = 1000


def namespace_state(
    client: RedisClient, layout: QueueLayout, namespace: str, now: float | None
) -> NamespaceQueueState:
    """See :meth:`worker.queue.redis_queue.RedisQueue.namespace_state`."""
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
