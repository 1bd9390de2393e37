"""Queue health for ``memworker status`` and metrics, read from counters the scripts keep.

Every script that moves a namespace in or out of the due, leases or dead set counts it in its
shard's stats hash, and each shard keeps, per scope, a zset of namespaces by their oldest log
entry (see ``worker/queue/lua/_lib.lua``). Reading queue health is therefore one pipelined
round trip of one small read-only script per shard: O(shards), whatever the number of waiting
namespaces. The only members read one by one are those whose due time has passed (the ones the
next sweep claims), at most :data:`DUE_LOOKED_AT` per shard, to split them by scope.

:func:`recount_stats` recomputes the same figures by walking every namespace: O(namespaces),
for audits and for tests that check the counters against it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Final

from worker.namespaces import Scope
from worker.queue.connect import RedisClient
from worker.queue.evalsha import run_pipeline
from worker.queue.keys import QueueLayout, scope_of
from worker.queue.scripts import SCRIPTS
from worker.queue.types import QueueStats, ScopeStats

#: Namespaces read per pipelined round trip when recounting.
PAGE: Final = 1000

#: Most due-by-now namespaces one shard's stats read looks at to split them by scope. Enough
#: for every sweep of a healthy deployment (a sweep claims ``claim_limit`` per shard); beyond
#: it (workers far behind) the rest of the shard's due namespaces are split in the proportions
#: of those looked at, so one status read stays a few milliseconds per shard.
DUE_LOOKED_AT: Final = 1000

#: Layout version of the counters, stored in each shard's stats hash (field ``v``): a shard
#: without it (fresh, or written by a release that kept no such counters) is recounted once,
#: at worker start (:func:`rebuild_stats`).
COUNTERS_VERSION: Final = "1"

#: Counter suffixes in the stats hash (see ``_lib.lua``).
_STATES: Final = ("due", "leased", "dead", "parked")


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def server_ms(reply: Any) -> int:
    """A ``TIME`` reply (seconds, microseconds) as epoch ms.

    >>> server_ms((1700000000, 250000))
    1700000000250
    """
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def collect_stats(
    client: RedisClient,
    layout: QueueLayout,
    now_ms: int | None,
    *,
    looked_at: int = DUE_LOOKED_AT,
) -> QueueStats:
    """Per-scope counts over every shard, from the counters; see
    :class:`~worker.queue.types.ScopeStats`. One pipelined round trip.

    ``looked_at``: most due-by-now namespaces read per shard (:data:`DUE_LOOKED_AT`).

    Ages and due states are measured against the Redis server's clock (``now_ms`` is a test
    hook), the same clock that stamped them.
    """
    scopes = [scope.value for scope in Scope]
    hook = "" if now_ms is None else now_ms
    calls = [
        SCRIPTS["stats"].bind(layout, shard, now=hook, looked_at=looked_at, scopes=scopes)
        for shard in range(layout.shards)
    ]
    replies = run_pipeline(client, calls)
    pending: dict[str, int] = defaultdict(int)
    states: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    due_now: dict[str, float] = defaultdict(float)
    oldest: dict[str, int] = {}
    seen: set[str] = set()
    at_ms = 0
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
        at, due_total, looked, flat, *per_scope = reply
        at_ms = int(at)
        fields = {_s(flat[i]): int(flat[i + 1]) for i in range(0, len(flat), 2)}
        for name, value in fields.items():
            scope, _, state = name.partition(":")
            if not state and name != "v" and not name.startswith("floor_"):
                pending[scope] += value
                seen.add(scope)
            elif state in _STATES:
                states[scope][state] += value
        # Due namespaces beyond those looked at are split like the looked-at ones.
        scale = (int(due_total) / int(looked)) if int(looked) else 0.0
        for scope, ready, first in per_scope:
            name = _s(scope)
            due_now[name] += int(ready) * scale
            ms = int(float(_s(first)))
            if ms >= 0:
                oldest[name] = min(oldest.get(name, ms), ms)
    now = now_ms if now_ms is not None else at_ms
    out = {}
    for scope in sorted(seen | {s for s, c in states.items() if any(c.values())}):
        c = states[scope]
        queued = max(c["due"] - c["parked"], 0)
        due = min(round(due_now[scope]), queued)
        out[scope] = ScopeStats(
            pending=max(pending[scope], 0),  # never shown negative, even after manual edits
            waiting=queued - due,
            due=due,
            leased=max(c["leased"], 0),
            dead=max(c["dead"], 0),
            oldest_pending_age=max(now - oldest[scope], 0) / 1000 if scope in oldest else None,
        )
    return QueueStats(scopes=out)


def rebuild_stats(client: RedisClient, layout: QueueLayout) -> int:
    """Recount the set counters and oldest-entry indexes of every shard that lacks them (see
    :data:`COUNTERS_VERSION`); one pipelined round trip. Returns how many namespaces were
    recounted (0 when every shard was counted already). Each shard's recount is one script,
    so it never interleaves with a claim or an ack of that shard."""
    scopes = [scope.value for scope in Scope]
    calls = [
        SCRIPTS["stats_rebuild"].bind(layout, shard, version=COUNTERS_VERSION, scopes=scopes)
        for shard in range(layout.shards)
    ]
    recounted = 0
    for reply in run_pipeline(client, calls):
        if isinstance(reply, Exception):
            raise reply
        recounted += max(int(reply), 0)
    return recounted


def recount_stats(client: RedisClient, layout: QueueLayout, now_ms: int | None) -> QueueStats:
    """The same figures as :func:`collect_stats`, recomputed by reading every member of every
    due, leases and dead set and the oldest entry of each of their logs: O(namespaces).

    For audits and tests of the counters; ``memworker status`` and the sweep never call it.
    """
    if now_ms is None:
        now_ms = server_ms(client.time())
    pipe = client.pipeline(transaction=False)
    for shard in range(layout.shards):
        pipe.hgetall(layout.stats(shard))
        pipe.zrange(layout.due(shard), 0, -1, withscores=True)
        pipe.zrange(layout.leases(shard), 0, -1)
        pipe.zrange(layout.dead(shard), 0, -1)
    replies = pipe.execute()

    state: dict[str, str] = {}
    listed: set[str] = set()
    for shard in range(layout.shards):
        counts, due, leases, dead = replies[4 * shard : 4 * shard + 4]
        listed.update(
            _s(f)
            for f in counts
            if ":" not in _s(f) and _s(f) != "v" and not _s(f).startswith("floor_")
        )
        for ns, score in due:
            state[_s(ns)] = "due" if score <= now_ms else "waiting"
        for ns in leases:  # a parked namespace is also in `due`; leased wins
            state[_s(ns)] = "leased"
        for ns in dead:
            state[_s(ns)] = "dead"

    counts_by_scope: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ns, where in state.items():
        counts_by_scope[scope_of(ns)][where] += 1
    pending, oldest = _read_logs(client, layout, list(state), now_ms)

    scopes = {}
    for scope in sorted(listed | set(counts_by_scope)):
        c = counts_by_scope[scope]
        scopes[scope] = ScopeStats(
            pending=pending.get(scope, 0),
            waiting=c["waiting"],
            due=c["due"],
            leased=c["leased"],
            dead=c["dead"],
            oldest_pending_age=oldest.get(scope),
        )
    return QueueStats(scopes=scopes)


def _read_logs(
    client: RedisClient, layout: QueueLayout, namespaces: list[str], now_ms: int
) -> tuple[dict[str, int], dict[str, float]]:
    """Pending entries and seconds since the oldest pending entry, per scope (a stream id
    starts with its ms). Every namespace with candidates is in the due, leases or dead set."""
    pending: dict[str, int] = defaultdict(int)
    oldest: dict[str, int] = {}
    for start in range(0, len(namespaces), PAGE):
        page = namespaces[start : start + PAGE]
        pipe = client.pipeline(transaction=False)
        for ns in page:
            pipe.xlen(layout.log(ns))
            pipe.xrange(layout.log(ns), "-", "+", count=1)
        replies = pipe.execute()
        for i, ns in enumerate(page):
            scope, entries = scope_of(ns), replies[2 * i + 1]
            pending[scope] += int(replies[2 * i])
            if entries:
                ms = int(_s(entries[0][0]).partition("-")[0])
                oldest[scope] = min(oldest.get(scope, ms), ms)
    return pending, {scope: max(now_ms - ms, 0) / 1000 for scope, ms in oldest.items()}
