"""The queue's Lua scripts and how they are run: EVALSHA, loading the script on NOSCRIPT.

Each operation is one script in ``worker/queue/lua/<name>.lua`` whose header lists its KEYS and
ARGV. Scripts marked ``-- uses _lib.lua`` get the shared helpers prepended, and those marked
``-- uses _sets.lua`` the set helpers too (after them); the hot path's enqueue does without
the latter, because every prepended function is created again on each call.

Calls go out as EVALSHA; only when Redis answers NOSCRIPT (after a restart or ``SCRIPT
FLUSH``) is the script loaded and the call re-sent. redis-py's ``register_script`` does this for
single calls, but in a pipeline it sends ``SCRIPT EXISTS`` before every ``execute()`` — a
second round trip per batch — hence :func:`run_pipeline`.

On a Redis Cluster redis-py refuses scripts in a pipeline, so :func:`run_pipeline` groups the
calls by the node that owns their slot and pipelines each group on that node's own
connection; a call the node redirects (``MOVED``/``ASK`` during a resharding or failover) or
cannot answer is sent again alone through the cluster client, which follows redirections and
refreshes its slot map.

The hot path goes one step further: it sends EVALSHA calls packed with :func:`pack_command`
over its own lean pool (``worker.hotpath.pool``), skipping redis-py's per-command machinery.

>>> SCRIPTS["enqueue"].name, len(SCRIPTS["enqueue"].sha)
('enqueue', 40)
>>> "local function restore_first" in SCRIPTS["ack"].source
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

import redis
from redis.cluster import RedisCluster
from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from worker.queue.connect import RedisClient

#: A script's KEYS or ARGV as sent: strings, or integers (ms, counts, tokens).
Args = Sequence[str | int]

#: Helper files in the order they are prepended, each to the scripts naming it.
_LIBS: Final = ("_lib", "_sets")
_NAMES: Final = (
    "enqueue",
    "claim",
    "extend",
    "ack",
    "settle",
    "mark_due",
    "dlq_retry",
    "dlq_drop",
    "purge",
    "stats",
    "stats_rebuild",
    "beat_lock",
)


@dataclass(frozen=True)
class LuaScript:
    """One script's source and the SHA1 Redis caches it under."""

    name: str
    source: str
    sha: str

    def call(self, client: RedisClient, keys: Args, args: Args) -> Any:
        """Run the script in one round trip (two more, once, if Redis lost its script cache)."""
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            client.script_load(self.source)
            return client.evalsha(self.sha, len(keys), *keys, *args)


Call = tuple[LuaScript, Args, Args]


def pack_bulk(*parts: bytes) -> bytes:
    """``parts`` as Redis protocol (RESP) bulk strings, without the array header."""
    return b"".join(b"$%d\r\n%b\r\n" % (len(part), part) for part in parts)


def pack_command(*parts: bytes) -> bytes:
    """One command in the Redis protocol, ready to send.

    >>> pack_command(b"PING").split()
    [b'*1', b'$4', b'PING']
    """
    return b"*%d\r\n" % len(parts) + pack_bulk(*parts)


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
                results[i] = script.call(client, keys, args)
            except redis.ResponseError as exc:
                results[i] = exc
    return results


def _load(name: str, libs: dict[str, str]) -> LuaScript:
    source = resources.files("worker.queue").joinpath("lua", f"{name}.lua").read_text("utf-8")
    used = [text for lib, text in libs.items() if f"-- uses {lib}.lua" in source]
    source = "\n".join([*used, source])
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


def _load_all() -> dict[str, LuaScript]:
    folder = resources.files("worker.queue").joinpath("lua")
    libs = {lib: folder.joinpath(f"{lib}.lua").read_text("utf-8") for lib in _LIBS}
    return {name: _load(name, libs) for name in _NAMES}


#: Every script by name, read once at import.
SCRIPTS: Final[dict[str, LuaScript]] = _load_all()
