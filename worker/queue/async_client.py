"""The hot-path client on an event loop (:class:`AsyncMemoryClient`), and its connections.

Async twin of :class:`~worker.queue.client.MemoryClient` with the same connection rules as
:mod:`worker.queue.pool` (bounded, no retries, a stale pooled socket replaced, every new
connection probed for an evicting policy, scripts loaded on NOSCRIPT), over ``redis.asyncio``;
kept apart so that a synchronous client never imports asyncio. Each call, whatever its round
trips, ends at the timeout: a connection cancelled mid-reply is closed, never reused.

>>> from worker import AsyncMemoryClient
>>> async def reply():  # doctest: +SKIP
...     async with AsyncMemoryClient() as memory:
...         return await memory.enqueue(user_id="u1", trace_id="req-42", text="Call me Sam")
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

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
from worker.queue.client import CandidateBuilder, ClientSettings, client_settings
from worker.queue.pool import (
    HOTPATH_FAILURES,
    HOTPATH_MAX_CONNECTIONS,
    EvictionGuard,
    check_url,
    unavailable,
)
from worker.queue.redis import ClusterAddress, is_cluster_url, redacted, resolve_redis_url
from worker.queue.scripts import Args, Call, LuaScript
from worker.types import EnqueueFields

if TYPE_CHECKING:
    from typing_extensions import Unpack


#: The connection class of each single-node URL scheme.
CONNECTIONS: Final = {
    "redis": Connection,
    "rediss": SSLConnection,
    "unix": UnixDomainSocketConnection,
}

AsyncClient = redis.asyncio.Redis | AsyncRedisCluster


class AsyncHotPool:
    """Async twin of :class:`~worker.queue.pool.HotPool`, for one event loop."""

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
        """See :meth:`HotPool.run_one <worker.queue.pool.HotPool.run_one>`."""
        return (await self.run_script([(script, keys, args)]))[0]

    async def run_script(self, calls: list[Call]) -> list[Any]:
        """See :meth:`HotPool.run_script <worker.queue.pool.HotPool.run_script>`; the
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


class AsyncMemoryClient:
    """Hot-path client for one event loop; share one per process. An async context manager."""

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        max_connections: int = HOTPATH_MAX_CONNECTIONS,
    ) -> None:
        """See :class:`~worker.queue.client.MemoryClient`: without ``settings``, the
        deployment's settings from the environment (an edge of the chat service)."""
        self.settings = client_settings() if settings is None else ClientSettings.of(settings)
        self.url = resolve_redis_url(self.settings)
        self._timeout = self.settings.socket_timeout_seconds
        self._pool = AsyncHotPool(
            self.url,
            self._timeout,
            max_connections,
            allow_evicting=self.settings.allow_evicting_redis,
        )
        self._builder = CandidateBuilder(self.settings, self.url)

    @classmethod
    def from_url(cls, url: str | None, **settings_overrides: Any) -> AsyncMemoryClient:
        """As :meth:`MemoryClient.from_url <worker.queue.client.MemoryClient.from_url>`."""
        return cls(client_settings(url, **settings_overrides))

    async def enqueue(self, /, **fields: Unpack[EnqueueFields]) -> str:
        """Queue one candidate memory; returns its id. One Redis round trip.

        Keyword arguments only: :class:`~worker.models.EnqueueFields`, checked and described
        as in :meth:`MemoryClient.enqueue`.
        """
        builder = self._builder
        candidate = builder.candidate(fields)
        try:
            result = await self._pool.run_one(*builder.call(candidate))
        except HOTPATH_FAILURES as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return builder.check_one(candidate, result)

    async def enqueue_many(self, items: Iterable[EnqueueFields]) -> list[str]:
        """Queue several candidates (dicts of :meth:`enqueue`'s keyword arguments) in one
        pipelined round trip; see :meth:`MemoryClient.enqueue_many`."""
        candidates = self._builder.candidates(items)
        if not candidates:
            return []
        try:
            results = await self._pool.run_script(self._builder.calls(candidates))
        except HOTPATH_FAILURES as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return self._builder.check(candidates, results)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
