"""Script calls through redis-py: EVALSHA, the script loaded again on NOSCRIPT, pipelines.

What the workers, the CLI and the operators' side run their scripts with (the hot path packs
its own calls: :mod:`worker.hotpath.pool`). redis-py's ``register_script`` reloads on NOSCRIPT
for single calls, but in a pipeline it sends ``SCRIPT EXISTS`` before every ``execute()`` — a
second round trip per batch — hence :func:`run_pipeline`.

On a Redis Cluster redis-py refuses scripts in a pipeline, so :func:`run_pipeline` groups the
calls by the node that owns their slot and pipelines each group on that node's own
connection; a call the node redirects (``MOVED``/``ASK`` during a resharding or failover) or
cannot answer is sent again alone through the cluster client, which follows redirections and
refreshes its slot map.

>>> import redis
>>> from worker.queue.keys import QueueLayout
>>> from worker.queue.scripts import SCRIPTS
>>> client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
>>> script, keys, args = SCRIPTS["stats"].bind(
...     QueueLayout("mwdoc", 1), 0, now="", looked_at=0, scopes=[])
>>> call_script(client, script, keys, args)[1:3]
[0, 0]
>>> client.close()
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import redis
from redis.cluster import RedisCluster
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from worker.queue.connect import RedisClient
from worker.queue.scripts import Args, Call, LuaScript


def call_script(client: RedisClient, script: LuaScript, keys: Args, args: Args) -> Any:
    """Run ``script`` in one round trip (two more, once, if Redis lost its script cache)."""
    try:
        return client.evalsha(script.sha, len(keys), *keys, *args)
    except NoScriptError:
        client.script_load(script.source)
        return client.evalsha(script.sha, len(keys), *keys, *args)


def run_pipeline(client: RedisClient, calls: Sequence[Call]) -> list[Any]:
    """Run many script calls in one round trip; each result is a value or the exception raised.

    Calls refused with NOSCRIPT are re-sent once, after loading their scripts; NOSCRIPT means
    the call did not run, so re-sending it cannot apply it twice.
    """
    results = _send(client, calls)
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        for script in {calls[i][0] for i in missing}:
            client.script_load(script.source)
        for i, result in zip(missing, _send(client, [calls[i] for i in missing]), strict=True):
            results[i] = result
    return results


def _send(client: RedisClient, calls: Sequence[Call]) -> list[Any]:
    if isinstance(client, RedisCluster):
        return _send_cluster(client, calls)
    return _send_node(client, calls)


def _send_node(client: redis.Redis, calls: Sequence[Call]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for script, keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))


#: Replies that mean "this node did not run the call; ask the cluster again" (a node that
#: could not be reached is recorded as ``TryAgainError`` too: see :func:`unreachable`).
RESEND: Final = (MovedError, AskError, TryAgainError)


#: What one call sent again through the cluster client may fail with, kept as its result.
_CALL_FAILURES: Final = (redis.ResponseError, redis.ConnectionError, redis.TimeoutError)


def unreachable(count: int) -> list[Exception]:
    """Stand-in replies for ``count`` calls whose node could not be reached: sent again."""
    return [TryAgainError("node unreachable")] * count


def _send_cluster(client: RedisCluster, calls: Sequence[Call]) -> list[Any]:
    """One pipeline per node owning the calls' slots (each call's keys share one slot)."""
    groups: dict[str, list[int]] = {}
    nodes: dict[str, Any] = {}
    for i, (_, keys, _) in enumerate(calls):
        node = client.get_node_from_key(keys[0])  # type: ignore[no-untyped-call]
        groups.setdefault(node.name, []).append(i)
        nodes[node.name] = node
    results: list[Any] = [None] * len(calls)
    for name, indexes in groups.items():
        try:
            replies = _send_node(nodes[name].redis_connection, [calls[i] for i in indexes])
        except (redis.ConnectionError, redis.TimeoutError):
            # The node went away (a failover?): the cluster client below finds its successor.
            # A call that did reach it before the connection broke runs twice: enqueue then
            # holds the candidate twice under one id (consolidation merges it once); claim,
            # extend, ack and settle are fenced by the lease token.
            replies = unreachable(len(indexes))
        for i, reply in zip(indexes, replies, strict=True):
            results[i] = reply
    for i, reply in enumerate(results):
        if isinstance(reply, RESEND):
            script, keys, args = calls[i]
            try:
                results[i] = call_script(client, script, keys, args)
            except (*_CALL_FAILURES, redis.RedisClusterException) as exc:
                # This call's failure, as a value: raising would lose the others' results,
                # such as the leases other shards of a sweep just granted. A node still down
                # mid-failover fails only the calls of its slots.
                results[i] = exc
    return results
