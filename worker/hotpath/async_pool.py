"""The hot path's client for an event loop (:class:`~worker.AsyncMemoryClient`).

The same client as :mod:`worker.hotpath.pool` (bounded, no retries, a stale pooled socket
replaced, every new connection probed for an evicting policy, scripts loaded on NOSCRIPT),
over ``redis.asyncio``; kept apart so that a synchronous client never imports asyncio. Each
call, whatever its round trips, ends at the timeout: a connection cancelled mid-reply is
closed, never reused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

import redis
import redis.asyncio
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

from worker.errors import MemworkerError, QueueUnavailable
from worker.hotpath.connection import check_url
from worker.hotpath.eviction import EvictionGuard
from worker.queue.address import ClusterAddress, is_cluster_url, redacted
from worker.queue.scripts import Args, Call, LuaScript

#: The connection class of each single-node URL scheme.
CONNECTIONS: Final = {
    "redis": Connection,
    "rediss": SSLConnection,
    "unix": UnixDomainSocketConnection,
}

AsyncClient = redis.asyncio.Redis | AsyncRedisCluster


class AsyncHotPool:
    """Async twin of :class:`~worker.hotpath.pool.HotPool`, for one event loop."""

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        check_url(url)
        self._url, self._timeout = url, timeout
        self._guard = EvictionGuard(redacted(url), allow_evicting=allow_evicting)
        self._cluster = is_cluster_url(url)
        self._client: AsyncClient = self._open(max_connections)

    def _open(self, max_connections: int) -> AsyncClient:
        if not self._cluster:
            scheme = self._url.partition("://")[0]
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                self._url,
                connection_class=CONNECTIONS[scheme],
                max_connections=max_connections,
                timeout=self._timeout,
                retry=Retry(NoBackoff(), 0),
                redis_connect_func=self._admit,
                socket_timeout=self._timeout,
                socket_connect_timeout=self._timeout,
            )
            return redis.asyncio.Redis(connection_pool=pool)
        address = ClusterAddress.parse(self._url)
        client = AsyncRedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in address.nodes],
            username=address.username,
            password=address.password,
            ssl=address.tls,
            retry=Retry(NoBackoff(), 1),
            max_connections=max_connections,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout,
        )
        # Every node's connections, those of the nodes it finds included, are checked too.
        nodes = client.nodes_manager
        nodes.connection_kwargs["redis_connect_func"] = self._admit
        for node in nodes.startup_nodes.values():
            node.connection_kwargs["redis_connect_func"] = self._admit
        return client

    async def _admit(self, connection: AbstractConnection) -> None:
        """A new connection: logged in (AUTH, SELECT), then checked not to evict."""
        await connection.on_connect()
        await self._guard.aprobe(connection)

    async def run_one(self, script: LuaScript, keys: Args, args: Args) -> Any:
        """See :meth:`HotPool.run_one <worker.hotpath.pool.HotPool.run_one>`."""
        return (await self.run_script([(script, keys, args)]))[0]

    async def run_script(self, calls: list[Call]) -> list[Any]:
        """See :meth:`HotPool.run_script <worker.hotpath.pool.HotPool.run_script>`; the
        whole call ends at the timeout (the built-in ``TimeoutError``)."""
        async with asyncio.timeout(self._timeout):
            if self._cluster:
                await self._initialized()
            results = await self._send(calls)
            missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
            if missing:
                for script in {calls[i][0] for i in missing}:
                    await self._client.script_load(script.source)
                again = await self._send([calls[i] for i in missing])
                for i, result in zip(missing, again, strict=True):
                    results[i] = result
            return results

    async def _initialized(self) -> None:
        """The cluster's slot map, read once (later calls return at once)."""
        assert isinstance(self._client, AsyncRedisCluster)
        try:
            await self._client.initialize()
        except redis.RedisClusterException as exc:  # no node answered the slot-map request
            if isinstance(exc.__cause__, MemworkerError):  # one answered, and evicts
                raise exc.__cause__ from None
            raise QueueUnavailable(
                f"no node of the Redis Cluster {redacted(self._url)} answered ({exc}); start "
                "the cluster or fix the seed nodes in MEMWORKER_REDIS_URL"
            ) from None

    async def _send(self, calls: Sequence[Call]) -> list[Any]:
        """One pipeline of EVALSHA calls (on a cluster, one per node, the nodes at once; a
        namespace's calls share a node and stay in order); errors as values."""
        pipe = self._client.pipeline(transaction=False)
        for script, keys, args in calls:
            pipe.evalsha(script.sha, len(keys), *keys, *args)
        return list(await pipe.execute(raise_on_error=False))

    async def close(self) -> None:
        await self._client.aclose()
