"""The hot path's Redis client: redis-py, bounded, fail-fast, refusing an evicting server.

One :class:`HotPool` per :class:`~worker.MemoryClient`, over ``redis.Redis`` for one server
(``redis://``, ``rediss://``, ``unix://``) or ``redis.cluster.RedisCluster`` for a
``redis+cluster://`` URL (:func:`worker.queue.connect.open_redis`, as the workers connect):

- At most ``max_connections`` sockets (per node); a caller waits at most the timeout for one.
- No retries. A pooled socket the server closed meanwhile (a restart, its ``timeout``) is
  found closed when the pool hands it out, and replaced by a fresh connection.
- A round trip ends at the timeout whatever the server does: each read waits at most what is
  left of it, so a reply trickling in byte by byte ends at the deadline too
  (:class:`DeadlineSocket`). A connection that timed out is closed, never reused: a late
  reply is never read as the next call's.
- Every new connection is first asked for the server's ``maxmemory-policy``; an evicting one
  is refused (:mod:`worker.hotpath.eviction`). Steady-state calls reuse checked sockets.
- Scripts run as ``EVALSHA``, loaded when Redis answers ``NOSCRIPT``
  (:mod:`worker.queue.evalsha`: one round trip per call or per pipelined batch; on a cluster
  a batch is split by node and what a node redirects is sent again through the cluster).
"""

from __future__ import annotations

import socket
import threading
from time import monotonic
from typing import Any, Final

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.retry import Retry

from worker.hotpath.connection import check_url
from worker.hotpath.eviction import EvictionGuard
from worker.queue.address import is_cluster_url, redacted
from worker.queue.connect import RedisClient, open_redis
from worker.queue.evalsha import call_script, run_pipeline
from worker.queue.scripts import Args, Call, LuaScript

#: How late a read may start after its send and still get the whole timeout (the call then ends
#: at most this late): setting a socket's timeout costs system calls, which the common case, a
#: reply read at once, does not pay.
SLACK_SECONDS: Final = 0.001


class DeadlineSocket:
    """A socket whose reads end at a deadline: ``timeout`` after the last send.

    redis-py bounds each ``recv`` by the socket timeout; a reply arriving one byte per
    almost-timeout would then take as long as it likes. Here every blocking ``recv`` after a
    send waits at most what is left of that send's deadline (a non-blocking poll, redis-py's
    check of a pooled socket, is left alone). Everything else is the wrapped socket's.
    """

    __slots__ = ("_deadline", "_short", "_sock", "_timeout")

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self._sock = sock
        self._timeout = timeout
        self._deadline = 0.0
        self._short = False

    def sendall(self, data: Any, /) -> None:
        if self._short:
            self._sock.settimeout(self._timeout)
            self._short = False
        self._deadline = monotonic() + self._timeout
        self._sock.sendall(data)

    def recv(self, size: int, /) -> bytes:
        sock = self._sock
        if sock.gettimeout() != 0:
            left = self._deadline - monotonic()
            if left <= 0:
                raise TimeoutError(f"no whole reply from Redis within {self._timeout:g} s")
            if left < self._timeout - SLACK_SECONDS:  # a read right after the send keeps it
                sock.settimeout(left)
                self._short = True
        return sock.recv(size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Deadline(AbstractConnection):
    """Connections whose socket is a :class:`DeadlineSocket`."""

    def _connect(self) -> Any:
        sock = super()._connect()  # type: ignore[safe-super,no-untyped-call]
        return DeadlineSocket(sock, self.socket_timeout or 0.0)


class HotConnection(_Deadline, Connection):
    """TCP (``redis://``)."""


class HotSSLConnection(_Deadline, SSLConnection):
    """TLS (``rediss://``)."""


class HotUnixConnection(_Deadline, UnixDomainSocketConnection):
    """A Unix socket (``unix://``)."""


#: The connection class of each single-node URL scheme.
CONNECTIONS: Final = {
    "redis": HotConnection,
    "rediss": HotSSLConnection,
    "unix": HotUnixConnection,
}


class HotPool:
    """Thread-safe client for the hot path's script calls; one per client (see the module).

    Connects on first use, a cluster's slot map included: a chat host that starts while Redis
    is down gets :class:`~worker.errors.QueueUnavailable` per enqueue, not at start.
    """

    def __init__(
        self, url: str, timeout: float, max_connections: int, *, allow_evicting: bool = False
    ) -> None:
        self._url, self._timeout, self._max = url, timeout, max_connections
        check_url(url)
        self._guard = EvictionGuard(redacted(url), allow_evicting=allow_evicting)
        self._lock = threading.Lock()
        self._client: RedisClient | None = None

    def _connected(self) -> RedisClient:
        client = self._client
        if client is not None:
            return client
        with self._lock:
            if self._client is None:
                self._client = self._open()
            return self._client

    def _open(self) -> RedisClient:
        if is_cluster_url(self._url):
            client = open_redis(self._url, timeout=self._timeout, max_connections=self._max)
            assert isinstance(client, RedisCluster)
            # The client read its slot map over connections of its own; from now on every new
            # connection of a node, once logged in, is checked too (RedisCluster.on_connect
            # runs this hook), and those already open are closed so that none goes unchecked.
            client.user_on_connect_func = self._guard.probe
            client.disconnect_connection_pools()  # type: ignore[no-untyped-call]
            return client
        scheme = self._url.partition("://")[0]
        pool = redis.BlockingConnectionPool.from_url(
            self._url,
            connection_class=CONNECTIONS[scheme],
            max_connections=self._max,
            timeout=self._timeout,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout,
            retry=Retry(NoBackoff(), 0),
            redis_connect_func=self._admit,
        )
        return redis.Redis(connection_pool=pool)

    def _admit(self, connection: AbstractConnection) -> None:
        """A new connection: logged in (AUTH, SELECT), then checked not to evict."""
        connection.on_connect()  # type: ignore[no-untyped-call]
        self._guard.probe(connection)

    def run_one(self, script: LuaScript, keys: Args, args: Args) -> Any:
        """Run one script call (loading the script on NOSCRIPT); an error reply is returned
        as its ``ResponseError``, a problem reaching Redis raised."""
        try:
            return call_script(self._connected(), script, keys, args)
        except redis.ResponseError as exc:
            return exc

    def run_script(self, calls: list[Call]) -> list[Any]:
        """Run script ``calls`` in one pipelined round trip (per node); results in order,
        error replies as values."""
        return run_pipeline(self._connected(), calls)

    def close(self) -> None:
        """Close the idle connections (in-flight ones close when their call ends)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
