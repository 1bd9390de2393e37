"""The hot path on a Redis Cluster: the same interface as :mod:`worker.hotpath.pool`, routed.

The single-node pools write packed ``EVALSHA`` calls straight to one socket. A cluster needs
each call sent to the node that owns its slot and redirections followed, which redis-py's
cluster clients do; so these pools unpack the call (it is our own, fixed layout) and hand it
to :func:`worker.queue.scripts.run_pipeline` (one pipeline per node) or, async, to
``redis.asyncio.RedisCluster``. Every call still waits at most the socket timeout per
attempt, and a failover that outlasts the client's attempts raises a connection error, which
the client turns into :class:`~worker.errors.QueueUnavailable`.

>>> from worker.queue.scripts import pack_command
>>> unpack_call(pack_command(b"EVALSHA", b"abc", b"1", b"k", b"v"))
(['k'], ['v'])
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError

from worker.errors import QueueUnavailable
from worker.queue.address import ClusterAddress, redacted
from worker.queue.connect import RedisClient, open_redis
from worker.queue.scripts import Call, LuaScript, run_pipeline


def unpack_call(packed: bytes) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of a packed ``EVALSHA sha numkeys key… arg…`` command."""
    parts: list[str] = []
    view = memoryview(packed)
    at = packed.index(b"\r\n") + 2  # past the array header
    while at < len(packed):
        end = packed.index(b"\r\n", at)
        size = int(view[at + 1 : end])
        start = end + 2
        parts.append(bytes(view[start : start + size]).decode())
        at = start + size + 2
    numkeys = int(parts[2])
    return parts[3 : 3 + numkeys], parts[3 + numkeys :]


def _hash_tag(key: str) -> str:
    """The part of ``key`` Redis Cluster hashes (``{s3}`` of ``mw:{s3}:ns:…``)."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key


class ClusterHotPool:
    """Thread-safe, like :class:`~worker.hotpath.pool.HotPool`; one per client.

    Connects on first use, as the single-node pool does: a chat host that starts while the
    cluster is down gets :class:`~worker.errors.QueueUnavailable` per enqueue, not at import.
    """

    def __init__(self, url: str, timeout: float, max_connections: int) -> None:
        self._url, self._timeout, self._max = url, timeout, max_connections
        self._client: RedisClient | None = None
        self._lock = threading.Lock()

    def _connected(self) -> RedisClient:
        with self._lock:
            if self._client is None:
                self._client = open_redis(
                    self._url, timeout=self._timeout, max_connections=self._max
                )
            return self._client

    def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        unpacked: list[Call] = [(script, *unpack_call(call)) for call in calls]
        return run_pipeline(self._connected(), unpacked)

    def run_one(self, script: LuaScript, call: bytes) -> Any:
        return self.run_script(script, [call])[0]

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


class AsyncClusterHotPool:
    """Async twin of :class:`ClusterHotPool`, for one event loop."""

    def __init__(self, url: str, timeout: float, max_connections: int) -> None:
        address = ClusterAddress.parse(url)
        self._url = url
        self._client = AsyncRedisCluster(
            startup_nodes=[AsyncClusterNode(host, port) for host, port in address.nodes],
            username=address.username,
            password=address.password,
            ssl=address.tls,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=AsyncRetry(NoBackoff(), 1),
            max_connections=max_connections,
        )

    async def run_script(self, script: LuaScript, calls: list[bytes]) -> list[Any]:
        """The calls of each shard in order, the shards concurrently; per-call errors come
        back as values. (Calls of one namespace must arrive in order: its ids follow it.)"""
        by_shard: dict[str, list[int]] = {}
        unpacked = [unpack_call(call) for call in calls]
        for i, (keys, _) in enumerate(unpacked):
            by_shard.setdefault(_hash_tag(keys[0]), []).append(i)
        results: list[Any] = [None] * len(calls)

        async def in_order(indexes: list[int]) -> None:
            for i in indexes:
                results[i] = await self._one(script, *unpacked[i])

        try:
            await asyncio.gather(*(in_order(group) for group in by_shard.values()))
            return results
        except redis.RedisClusterException as exc:  # no node answered the slot-map request
            raise QueueUnavailable(
                f"no node of the Redis Cluster {redacted(self._url)} answered ({exc}); start "
                "the cluster or fix the seed nodes in MEMWORKER_REDIS_URL"
            ) from None

    async def run_one(self, script: LuaScript, call: bytes) -> Any:
        return (await self.run_script(script, [call]))[0]

    async def _one(self, script: LuaScript, keys: list[str], args: list[str]) -> Any:
        try:
            try:
                return await self._client.evalsha(script.sha, len(keys), *keys, *args)
            except NoScriptError:
                await self._client.script_load(script.source)
                return await self._client.evalsha(script.sha, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            return exc

    async def close(self) -> None:
        await self._client.aclose()
