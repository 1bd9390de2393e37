"""Fail-fast Redis connections and the errors that say what to do when Redis is not there.

A chat reply must never hang on Redis. So: bounded pools that wait at most the socket timeout
for a free connection, connect/read timeouts of ``settings.socket_timeout_seconds``, and no
client-side retries (a retried timeout would multiply the worst case). The hot-path clients
use :mod:`worker.hotpath.pool` over their own sockets (:mod:`worker.hotpath.wire`).

>>> redacted("redis://:s3cret@cache:6379/0")
'redis://:***@cache:6379/0'
>>> redacted("unix:///run/redis.sock")
'unix:///run/redis.sock'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeVar

from worker.errors import MemworkerError, QueueUnavailable
from worker.queue.address import is_cluster_url, redacted
from worker.queue.failures import is_timeout, is_unreachable, translate
from worker.queue.resp import ReplyError

if TYPE_CHECKING:
    from worker.hotpath.settings import ClientSettings

__all__ = ["HOTPATH_FAILURES", "HOTPATH_MAX_CONNECTIONS", "open_pool", "redacted", "unavailable"]

_Single = TypeVar("_Single")
_Cluster = TypeVar("_Cluster")

#: Most sockets one client process opens. Each enqueue holds a connection for one round trip
#: (~50 µs), so 32 serves thousands of concurrent requests; past it callers wait (at most the
#: socket timeout) instead of opening sockets without bound during a burst.
HOTPATH_MAX_CONNECTIONS: Final = 32

#: What a hot-path pool raises for Redis: a problem on the wire, or a refused handshake or
#: script load (a cluster pool raises these too, for what its cluster client raised).
HOTPATH_FAILURES: Final = (OSError, ReplyError)


def open_pool(
    settings: ClientSettings,
    url: str,
    max_connections: int,
    single: Callable[..., _Single],
    cluster: Callable[[], Callable[..., _Cluster]],
) -> _Single | _Cluster:
    """A client's pool for Redis at ``url``: ``single`` for one server, else the class that
    ``cluster()`` imports, so that a client of one Redis never loads redis-py (the cluster
    pools use its slot map). Both get the client's timeout and eviction override."""
    args = (url, settings.socket_timeout_seconds, max_connections)
    evicting = settings.allow_evicting_redis
    if is_cluster_url(url):
        return cluster()(*args, allow_evicting=evicting)
    return single(*args, allow_evicting=evicting)


def unavailable(url: str, exc: Exception, timeout: float) -> MemworkerError:
    """The :class:`QueueUnavailable` for a connection error or timeout talking to ``url``;
    any other Redis error (a refused password, a failed TLS handshake, a read-only
    replica…) as :func:`~worker.queue.failures.translate` names it."""
    where = redacted(url)
    if is_timeout(exc):
        return QueueUnavailable(
            f"Redis at {where} did not answer within {timeout:g} s; the candidate may not have "
            "been enqueued (retrying with the same idempotency_key is safe). Check Redis load "
            "and MEMWORKER_SOCKET_TIMEOUT_SECONDS"
        )
    if not is_unreachable(exc):
        return translate(exc, where)
    return QueueUnavailable(
        f"Redis at {where} is unreachable ({exc}); nothing was enqueued. Start Redis or fix "
        "MEMWORKER_REDIS_URL"
    )
