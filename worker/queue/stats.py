"""Queue health for ``memworker status`` and metrics, read without blocking Redis.

Plain pipelined reads rather than a script: the numbers are a snapshot for people and graphs,
not a decision, and a script walking every namespace would stall Redis on a large queue.
Cost: O(namespaces with pending work), in pages of :data:`PAGE`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

import redis

from worker.queue.keys import QueueLayout, scope_of
from worker.queue.types import QueueStats, ScopeStats

#: Namespaces read per pipelined round trip when looking for the oldest pending entry.
PAGE: Final = 1000


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def server_ms(reply: Any) -> int:
    """A ``TIME`` reply (seconds, microseconds) as epoch ms.

    >>> server_ms((1700000000, 250000))
    1700000000250
    """
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def collect_stats(client: redis.Redis, layout: QueueLayout, now_ms: int | None) -> QueueStats:
    """Per-scope counts over every shard; see :class:`~worker.queue.types.ScopeStats`.

    Ages and due states are measured against the Redis server's clock (``now_ms`` is a test
    hook), the same clock that stamped them.
    """
    pipe = client.pipeline(transaction=False)
    pipe.time()
    for shard in range(layout.shards):
        pipe.hgetall(layout.stats(shard))
        pipe.zrange(layout.due(shard), 0, -1, withscores=True)
        pipe.zrange(layout.leases(shard), 0, -1)
        pipe.zrange(layout.dead(shard), 0, -1)
    server_time, *replies = pipe.execute()
    if now_ms is None:
        now_ms = server_ms(server_time)

    pending: dict[str, int] = defaultdict(int)
    state: dict[str, str] = {}
    for shard in range(layout.shards):
        counts, due, leases, dead = replies[4 * shard : 4 * shard + 4]
        for scope, count in counts.items():
            pending[_s(scope)] += int(count)
        for ns, score in due:
            state[_s(ns)] = "due" if score <= now_ms else "waiting"
        for ns in leases:  # a parked namespace is also in `due`; leased wins
            state[_s(ns)] = "leased"
        for ns in dead:
            state[_s(ns)] = "dead"

    counts_by_scope: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ns, where in state.items():
        counts_by_scope[scope_of(ns)][where] += 1
    oldest = _oldest_ages(client, layout, list(state), now_ms)

    scopes = {}
    for scope in sorted(set(pending) | set(counts_by_scope)):
        c = counts_by_scope[scope]
        scopes[scope] = ScopeStats(
            pending=max(pending[scope], 0),  # never shown negative, even after manual edits
            waiting=c["waiting"],
            due=c["due"],
            leased=c["leased"],
            dead=c["dead"],
            oldest_pending_age=oldest.get(scope),
        )
    return QueueStats(scopes=scopes)


def _oldest_ages(
    client: redis.Redis, layout: QueueLayout, namespaces: list[str], now_ms: int
) -> dict[str, float]:
    """Seconds since the oldest pending entry, per scope (a stream id starts with its ms)."""
    oldest: dict[str, int] = {}
    for start in range(0, len(namespaces), PAGE):
        page = namespaces[start : start + PAGE]
        pipe = client.pipeline(transaction=False)
        for ns in page:
            pipe.xrange(layout.log(ns), "-", "+", count=1)
        for ns, entries in zip(page, pipe.execute(), strict=True):
            if entries:
                ms = int(_s(entries[0][0]).partition("-")[0])
                scope = scope_of(ns)
                oldest[scope] = min(oldest.get(scope, ms), ms)
    return {scope: max(now_ms - ms, 0) / 1000 for scope, ms in oldest.items()}
