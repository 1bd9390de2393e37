"""Fail-fast Redis connections and the errors that say what to do when Redis is not there.

A chat reply must never hang on Redis. So: bounded pools that wait at most the socket timeout
for a free connection, connect/read timeouts of ``settings.socket_timeout_seconds``, and no
client-side retries (redis-py retries connection errors *and* timeouts three times with
backoff by default, which would multiply the worst case). The hot-path clients use
:mod:`worker.hotpath.pool`; :func:`connect` is the same policy as a plain ``redis.Redis``
(for CLI commands).

>>> redacted("redis://:s3cret@cache:6379/0")
'redis://:***@cache:6379/0'
>>> redacted("unix:///run/redis.sock")
'unix:///run/redis.sock'
"""

from __future__ import annotations

from typing import Final

import redis

from worker.errors import MemworkerError, QueueUnavailable
from worker.queue.address import redacted
from worker.queue.connect import RedisClient, open_redis
from worker.queue.failures import translate

__all__ = ["HOTPATH_MAX_CONNECTIONS", "connect", "redacted", "unavailable"]

#: Most sockets one client process opens. Each enqueue holds a connection for one round trip
#: (~50 µs), so 32 serves thousands of concurrent requests; past it callers wait (at most the
#: socket timeout) instead of opening sockets without bound during a burst.
HOTPATH_MAX_CONNECTIONS: Final = 32


def connect(
    url: str, timeout: float, max_connections: int = HOTPATH_MAX_CONNECTIONS
) -> RedisClient:
    """A client on a bounded, fail-fast pool (``redis://``, ``rediss://``, ``unix://`` or
    ``redis+cluster://``)."""
    return open_redis(url, timeout=timeout, max_connections=max_connections)


def unavailable(url: str, exc: Exception, timeout: float) -> MemworkerError:
    """The :class:`QueueUnavailable` for a connection error or timeout talking to ``url``;
    any other Redis error (a refused password, a read-only replica…) as
    :func:`~worker.queue.failures.translate` names it."""
    where = redacted(url)
    if isinstance(exc, redis.AuthenticationError) or not isinstance(
        exc, redis.ConnectionError | redis.TimeoutError
    ):
        return translate(exc, where)
    if isinstance(exc, redis.TimeoutError):
        return QueueUnavailable(
            f"Redis at {where} did not answer within {timeout:g} s; the candidate may not have "
            "been enqueued (retrying with the same idempotency_key is safe). Check Redis load "
            "and MEMWORKER_SOCKET_TIMEOUT_SECONDS"
        )
    return QueueUnavailable(
        f"Redis at {where} is unreachable ({exc}); nothing was enqueued. Start Redis or fix "
        "MEMWORKER_REDIS_URL"
    )
