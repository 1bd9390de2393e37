"""Clients for the queue's Redis: one node (``redis://``, ``rediss://``, ``unix://``) or a
Redis Cluster (``redis+cluster://seed1:6379,seed2:6379``).

Every part that talks to the queue — the workers, the CLI, ``memworker status`` — opens its
client here, so a cluster URL means the same thing everywhere. On a cluster redis-py's
:class:`~redis.cluster.RedisCluster` follows ``MOVED`` and ``ASK`` redirections and refreshes
its slot map after a failover; errors that persist past its retries are translated by
:mod:`worker.queue.failures` into named errors. A script touches only keys of one shard,
which share a hash tag, so each call lands on one slot.

>>> client = open_redis("redis://127.0.0.1:6379/0", timeout=1.0)
>>> is_cluster(client)
False
>>> client.close()
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from worker.errors import QueueUnavailable
from worker.queue.address import ClusterAddress, is_cluster_url, redacted

#: A client of the queue's Redis: a single node or a cluster (the same commands either way,
#: except that a cluster refuses pipelined scripts; see :func:`worker.queue.evalsha.run_pipeline`).
RedisClient: TypeAlias = redis.Redis | RedisCluster

#: What a call to the queue's Redis can raise: redis-py's errors, and (on a cluster) its
#: cluster exceptions, which do not derive from them (e.g. a slot no node serves).
REDIS_FAILURES: Final = (redis.RedisError, redis.RedisClusterException)

#: Attempts of a cluster call across redirections and slot-map refreshes. A failover takes
#: the cluster's node timeout (seconds); past these the call fails with a named error instead
#: of blocking its caller.
CLUSTER_ATTEMPTS = 3


def is_cluster(client: RedisClient) -> bool:
    return isinstance(client, RedisCluster)


def open_redis(
    url: str,
    *,
    timeout: float,
    retries: bool = False,
    max_connections: int | None = None,
    health_check_interval: int = 0,
) -> RedisClient:
    """A client for ``url`` whose every call waits at most ``timeout`` seconds per attempt.

    ``retries=False`` (the hot path, the CLI) never retries a timeout; the workers pass
    ``True`` to ride out a brief failover. A cluster none of whose seeds answers raises
    :class:`~worker.errors.QueueUnavailable`, naming the URL (its password redacted).
    """
    if not is_cluster_url(url):
        if max_connections is not None:
            pool = redis.BlockingConnectionPool.from_url(
                url,
                max_connections=max_connections,
                timeout=timeout,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
            )
            return redis.Redis(connection_pool=pool)
        return redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            health_check_interval=health_check_interval,
            retry=Retry(ExponentialBackoff(cap=timeout), 2 if retries else 0),
        )
    return _open_cluster(url, timeout=timeout, retries=retries, max_connections=max_connections)


def _open_cluster(
    url: str, *, timeout: float, retries: bool, max_connections: int | None
) -> RedisCluster:
    address = ClusterAddress.parse(url)
    # Each node's pool: bounded like the single-node hot path when asked, else redis-py's.
    pool: dict[str, Any] = {} if max_connections is None else {"max_connections": max_connections}
    try:
        return RedisCluster(
            startup_nodes=[
                ClusterNode(host, port)  # type: ignore[no-untyped-call]
                for host, port in address.nodes
            ],
            username=address.username,
            password=address.password,
            ssl=address.tls,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            require_full_coverage=True,
            retry=Retry(ExponentialBackoff(cap=timeout), CLUSTER_ATTEMPTS if retries else 1),
            **pool,
        )
    except (*REDIS_FAILURES, OSError) as exc:
        raise QueueUnavailable(
            f"no node of the Redis Cluster {redacted(url)} answered ({exc}); start the "
            "cluster or fix the seed nodes in MEMWORKER_REDIS_URL"
        ) from None
