"""The hot path on a Redis Cluster: the same interface as :mod:`worker.hotpath.pool`, routed.

The single-node pools write packed ``EVALSHA`` calls straight to one socket. On a cluster each
call must reach the primary owning its slot: these pools keep one lean pool per primary and
route by the slot map of redis-py's cluster client. What a node redirects (``MOVED``/``ASK``
during a resharding or failover) or cannot answer is unpacked (the call is our own, fixed
layout) and sent again through that client (:func:`worker.queue.evalsha.run_pipeline`, or
``redis.asyncio.RedisCluster``), which follows the redirection and refreshes the map. Every
call still waits at most the socket timeout per attempt, and a failover that outlasts the
client's attempts raises a connection error, which the client turns into
:class:`~worker.errors.QueueUnavailable`.

>>> from worker.queue.resp import pack_command
>>> unpack_call(pack_command(b"EVALSHA", b"abc", b"1", b"k", b"v"))
(['k'], [b'v'])
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import redis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import NoScriptError

from worker.errors import QueueUnavailable
from worker.hotpath.async_pool import AsyncHotPool
from worker.hotpath.pool import HotPool
from worker.queue.address import ClusterAddress, redacted
from worker.queue.connect import open_redis
from worker.queue.evalsha import RESEND, run_pipeline, unreachable
from worker.queue.failures import is_unreachable, translate
from worker.queue.resp import ReplyError
from worker.queue.scripts import Call, LuaScript

#: A per-primary pool: :class:`HotPool` or :class:`AsyncHotPool`.
Pool = TypeVar("Pool", HotPool, AsyncHotPool)

#: Error replies of a node that did not run the call: the cluster client sends it again.
_REDIRECTS: Final = frozenset({"MOVED", "ASK", "TRYAGAIN"})


def _resend(reply: Any) -> bool:
    """A reply meaning "ask the cluster again": a node's redirection, or a stand-in for a
    node that could not be reached (:func:`~worker.queue.evalsha.unreachable`)."""
    if isinstance(reply, ReplyError):
        return reply.code in _REDIRECTS
    return isinstance(reply, RESEND)


@contextmanager
def _hot_failures(url: str) -> Iterator[None]:
    """What the cluster client raises, as the single-node pools raise it: a timeout or a lost
    connection as the built-in error (the client words those), anything else named."""
    try:
        yield
    except redis.TimeoutError as exc:
        raise TimeoutError(str(exc)) from exc
    except redis.ConnectionError as exc:
        if not is_unreachable(exc):  # a refused password or TLS handshake: Redis answered
            raise translate(exc, redacted(url)) from exc
        raise ConnectionError(str(exc)) from exc
    except (redis.RedisError, redis.RedisClusterException) as exc:
        raise translate(exc, redacted(url)) from exc


def unpack_call(packed: bytes) -> tuple[list[str], list[bytes]]:
    """KEYS and ARGV of a packed ``EVALSHA sha numkeys key… arg…`` command (ARGV as sent:
    bytes, since some are binary)."""
    parts: list[bytes] = []
    view = memoryview(packed)
    at = packed.index(b"\r\n") + 2  # past the array header
    while at < len(packed):
        end = packed.index(b"\r\n", at)
        size = int(view[at + 1 : end])
        start = end + 2
        parts.append(bytes(view[start : start + size]))
        at = start + size + 2
    numkeys = int(parts[2])
    return [key.decode() for key in parts[3 : 3 + numkeys]], parts[3 + numkeys :]


class _Routing:
    """What both cluster pools share: one lean pool per primary, made on first use, and the
    grouping of packed calls by the pool of the primary owning their slot."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, allow_evicting: bool
    ) -> None:
        self._url, self._timeout, self._max = url, timeout, max_connections
        self._allow_evicting = allow_evicting
        self._address = ClusterAddress.parse(url)
        self._nodes: dict[str, Any] = {}

    def _node_pool(self, nodes: Any, call: bytes, pool_class: type[Pool]) -> Pool:
        """The pool of the primary that ``nodes`` (a nodes manager) says owns ``call``."""
        node = nodes.get_node_from_slot(key_slot(call))
        pool: Pool | None = self._nodes.get(node.name)
        if pool is None:
            url = self._address.node_url(node.host, int(node.port))
            pool = self._nodes[node.name] = pool_class(
                url, self._timeout, self._max, allow_evicting=self._allow_evicting
            )
        return pool


def _grouped(pools: list[Pool]) -> list[tuple[Pool, list[int]]]:
    """The indexes of the calls each pool carries, given each call's pool, in call order."""
    groups: dict[int, tuple[Pool, list[int]]] = {}
    for i, pool in enumerate(pools):
        groups.setdefault(id(pool), (pool, []))[1].append(i)
    return list(groups.values())


class ClusterHotPool(_Routing):
    """Thread-safe, like :class:`~worker.hotpath.pool.HotPool`; one per client.

    Each call goes straight to the primary owning its slot over that node's own lean
    :class:`~worker.hotpath.pool.HotPool` (the slot is the packed call's first hash tag: the
    queue's keys carry ``{s<shard>}``, nothing before them a brace). The slot map is the
    cluster client's; a call the node redirects (``MOVED``/``ASK``/``TRYAGAIN``), or a node
    that cannot be reached, goes again through the cluster client, which follows the
    redirection and refreshes the map for the next calls.

    Each primary's pool probes its own connections for an evicting policy (one evicting
    primary loses candidates as surely as all of them). Connects on first use, as the
    single-node pool does: a chat host that starts while the
    cluster is down gets :class:`~worker.errors.QueueUnavailable` per enqueue, not at import.
    """

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        super().__init__(url, timeout, max_connections, allow_evicting)
        self._client: RedisCluster | None = None
        self._lock = threading.Lock()

    def _connected(self) -> RedisCluster:
        with self._lock:
            if self._client is None:
                client = open_redis(self._url, timeout=self._timeout, max_connections=self._max)
                assert isinstance(client, RedisCluster)
                self._client = client
            return self._client

    def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        with _hot_failures(self._url):
            return self._run(script, calls)

    def _run(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        nodes = self._connected().nodes_manager
        with self._lock:
            pools = [self._node_pool(nodes, call, HotPool) for call in calls]
        results: list[Any] = [None] * len(calls)
        for pool, indexes in _grouped(pools):
            try:
                replies = pool.run_script(script, [calls[i] for i in indexes])
            except OSError:
                # The node went away (a failover?): the cluster client finds its successor.
                # A call that had reached it runs twice: the candidate then sits twice under
                # one id, which consolidation merges once (as the single-node pool's retry).
                replies = unreachable(len(indexes))
            for i, reply in zip(indexes, replies, strict=True):
                results[i] = reply
        again = [i for i, r in enumerate(results) if _resend(r)]
        if again:
            unpacked: list[Call] = [(script, *unpack_call(calls[i])) for i in again]
            for i, reply in zip(again, run_pipeline(self._connected(), unpacked), strict=True):
                results[i] = reply
        return results

    def run_one(self, script: LuaScript, call: bytes) -> Any:
        return self.run_script(script, [call])[0]

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            nodes, self._nodes = self._nodes, {}
        for pool in nodes.values():
            pool.close()
        if client is not None:
            client.close()


class AsyncClusterHotPool(_Routing):
    """Async twin of :class:`ClusterHotPool`, for one event loop: the same routing over
    per-node :class:`~worker.hotpath.pool.AsyncHotPool` s, redirected calls sent again
    through ``redis.asyncio.RedisCluster``."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        super().__init__(url, timeout, max_connections, allow_evicting)
        self._client = AsyncRedisCluster(
            startup_nodes=[AsyncClusterNode(host, port) for host, port in self._address.nodes],
            username=self._address.username,
            password=self._address.password,
            ssl=self._address.tls,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=AsyncRetry(NoBackoff(), 1),
            max_connections=max_connections,
        )

    async def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        """One pipeline per node, the nodes concurrently; per-call errors come back as
        values. (A namespace's calls stay in order: they share a node and its pipeline.)"""
        try:
            await self._client.initialize()  # once; later calls return at once
        except redis.RedisClusterException as exc:  # no node answered the slot-map request
            raise QueueUnavailable(
                f"no node of the Redis Cluster {redacted(self._url)} answered ({exc}); start "
                "the cluster or fix the seed nodes in MEMWORKER_REDIS_URL"
            ) from None
        with _hot_failures(self._url):
            return await self._run(script, calls)

    async def _run(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        nodes = self._client.nodes_manager
        pools = [self._node_pool(nodes, call, AsyncHotPool) for call in calls]
        results: list[Any] = [None] * len(calls)

        async def on_node(pool: AsyncHotPool, indexes: list[int]) -> None:
            try:
                replies = await pool.run_script(script, [calls[i] for i in indexes])
            except OSError:  # as in ClusterHotPool
                replies = unreachable(len(indexes))
            for i, reply in zip(indexes, replies, strict=True):
                results[i] = reply

        await asyncio.gather(*(on_node(pool, indexes) for pool, indexes in _grouped(pools)))
        for i, reply in enumerate(results):  # in order: a namespace's ids follow its arrivals
            if _resend(reply):
                results[i] = await self._one(script, *unpack_call(calls[i]))
        return results

    async def run_one(self, script: LuaScript, call: bytes) -> Any:
        return (await self.run_script(script, [call]))[0]

    async def _one(self, script: LuaScript, keys: list[str], args: list[bytes]) -> Any:
        try:
            try:
                return await self._client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self._client.script_load(script.source)
                return await self._client.evalsha(script.sha, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            return exc

    async def close(self) -> None:
        nodes, self._nodes = self._nodes, {}
        for pool in nodes.values():
            await pool.close()
        await self._client.aclose()
