"""The hot path's connections: redis-py, bounded, fail-fast, refusing an evicting server.

A chat reply must never hang on Redis. One :class:`HotPool` per :class:`~worker.MemoryClient`,
over ``redis.Redis`` for one server or ``redis.cluster.RedisCluster`` for a
``redis+cluster://`` URL (:func:`worker.queue.redis.open_redis`, as the workers connect):

- At most ``max_connections`` sockets (per node); a caller waits at most the timeout for one.
- No client-side retries (a retried timeout would multiply the worst case). A pooled socket
  the server closed meanwhile is found closed when handed out, and replaced.
- A round trip ends at the timeout whatever the server does, a reply trickling in byte by
  byte included (:class:`DeadlineSocket`). A connection that timed out is closed, never
  reused: a late reply is never read as the next call's.
- Scripts run as ``EVALSHA``, loaded when Redis answers ``NOSCRIPT``
  (:mod:`worker.queue.scripts`; on a cluster a batch is split by node).

A single-node URL (``redis://``, ``rediss://`` or ``unix://``) takes ``db`` and, for
``rediss://``, ``ssl_cert_reqs`` (``required``, the default, ``optional`` or ``none``),
``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile`` and ``ssl_check_hostname``. Any other
option is refused, naming it: a TLS option the client ignored would silently weaken what the
URL asks for, and redis-py would take others (``socket_timeout``…) over the client's own.

>>> redacted("redis://:s3cret@cache:6379/0")
'redis://:***@cache:6379/0'
>>> redacted("unix:///run/redis.sock")
'unix:///run/redis.sock'
>>> check_url("unix:///run/redis.sock?db=3")
>>> try:
...     check_url("redis://cache:6379/0?socket_timeout=5")
... except ConfigurationError as exc:
...     print("does not apply socket_timeout" in str(exc))
True

**Evicting servers.** An ``allkeys-*`` ``maxmemory-policy`` deletes queued candidates under
memory pressure. The workers refuse to start on such a Redis
(:func:`worker.queue.deployment.check_durability`); the client must refuse too, or it
acknowledges candidates that are then silently evicted. The check costs one round trip **per
new connection**, never per enqueue: right after the handshake, before the socket carries any
candidate, it sends :data:`PROBE`. While the policy evicts, that socket is closed and
:class:`~worker.errors.QueueMisconfigured` raised, so every enqueue is refused until Redis is
fixed. A policy changed on a live server is seen at the next reconnect.

Managed Redis often disables ``CONFIG``: then ``INFO memory``'s ``maxmemory_policy`` decides.
Where both are refused, the client accepts, logs one warning per pool, and leaves the verdict
to the workers' start-up check. ``allow_evicting_redis`` is the same informed override for both
sides.

>>> policy_of([[b"maxmemory-policy", b"allkeys-lru"], b"# Memory\\r\\nmaxmemory_policy:x\\r\\n"])
'allkeys-lru'
>>> policy_of([Exception("unknown command 'CONFIG'"), b"# Memory\\r\\nmaxmemory_policy:noeviction"])
'noeviction'
>>> policy_of([Exception("NOPERM"), Exception("NOPERM")]) is None
True
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Mapping, Sequence
from time import monotonic
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qs, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.exceptions import ResponseError
from redis.retry import Retry

from worker.errors import ConfigurationError, MemworkerError, QueueMisconfigured, QueueUnavailable
from worker.queue.redis import (
    RedisClient,
    is_cluster_url,
    is_timeout,
    is_unreachable,
    open_redis,
    redacted,
    translate,
)
from worker.queue.scripts import Args, Call, LuaScript, call_script, run_pipeline
from worker.types import EVICTING_POLICIES

if TYPE_CHECKING:
    from redis.asyncio.connection import AbstractConnection as AsyncConnection
    from redis.connection import AbstractConnection

__all__ = ["HOTPATH_FAILURES", "HOTPATH_MAX_CONNECTIONS", "check_url", "redacted", "unavailable"]


#: Most sockets one client process opens. Each enqueue holds a connection for one round trip
#: (~100 µs), so 32 serves thousands of concurrent requests; past it callers wait (at most the
#: socket timeout) instead of opening sockets without bound during a burst.
HOTPATH_MAX_CONNECTIONS: Final = 32

#: What a hot-path pool raises for Redis: redis-py's errors (a cluster's too, which do not
#: derive from them) and, from the asyncio pool's deadline, the built-in ``TimeoutError``.
HOTPATH_FAILURES: Final = (redis.RedisError, redis.RedisClusterException, OSError)

_TLS_OPTIONS: Final = frozenset(
    {"ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname"}
)
_FALSE: Final = ("false", "0", "no")
#: The TLS options that take one of a few words, and those words.
_TLS_CHOICES: Final = {
    "ssl_cert_reqs": ("required", "optional", "none"),
    "ssl_check_hostname": ("true", "1", "yes", *_FALSE),
}


def check_url(url: str) -> None:
    """Check the options of a single-node ``url``: :class:`ConfigurationError` naming what is
    wrong, a TLS file that cannot be read included. A cluster URL is checked where it is
    parsed (:class:`~worker.queue.redis.ClusterAddress`)."""
    if is_cluster_url(url):
        return
    try:
        parts = urlsplit(url)
        options = {k: v[-1] for k, v in parse_qs(parts.query, strict_parsing=False).items()}
        db = options.pop("db", None)
        if parts.scheme != "unix" and parts.path.strip("/"):
            db = parts.path.strip("/")
        if db is not None:
            int(db)
    except ValueError as exc:
        raise ConfigurationError(
            f"Redis URL {redacted(url)!r} cannot be used ({exc}); the database is a number "
            "(redis://host:6379/0, unix:///path/to/redis.sock?db=0)"
        ) from None
    tls = parts.scheme == "rediss"
    unknown = sorted(set(options) - (_TLS_OPTIONS if tls else frozenset()))
    if unknown:
        raise ConfigurationError(
            f"Redis URL {redacted(url)!r} cannot be used by the hot-path client: it does "
            f"not apply {', '.join(unknown)}. It takes db and, for rediss://, "
            f"{', '.join(sorted(_TLS_OPTIONS))}; its timeout is "
            "MEMWORKER_SOCKET_TIMEOUT_SECONDS. Remove the other options from the URL"
        )
    for name, allowed in _TLS_CHOICES.items():
        given = options.get(name)
        if given is not None and given.lower() not in allowed:
            raise ConfigurationError(
                f"Redis URL {redacted(url)!r} cannot be used: {name} is {given!r}; use "
                f"{' or '.join(allowed)}"
            )
    if tls:
        _check_tls_files(url, options)


def _check_tls_files(url: str, options: dict[str, str]) -> None:
    """Load the URL's CA and certificate files once, so that a missing or unreadable one is a
    :class:`ConfigurationError` when the client is built, not a failed enqueue later."""
    try:
        context = ssl.create_default_context(cafile=options.get("ssl_ca_certs"))
        if "ssl_certfile" in options:
            context.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"Redis URL {redacted(url)!r}: its TLS files cannot be used ({exc}); fix "
            "ssl_ca_certs, ssl_certfile or ssl_keyfile"
        ) from None


def unavailable(url: str, exc: Exception, timeout: float) -> MemworkerError:
    """The :class:`QueueUnavailable` for a connection error or timeout talking to ``url``;
    any other Redis error (a refused password, a failed TLS handshake, a read-only
    replica…) as :func:`~worker.queue.redis.translate` names it."""
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


log = logging.getLogger(__name__)

#: ``CONFIG GET maxmemory-policy`` then ``INFO memory``, sent together on a new connection.
PROBE: Final = (("CONFIG", "GET", "maxmemory-policy"), ("INFO", "memory"))
_INFO_FIELD: Final = "maxmemory_policy:"


def policy_of(replies: Sequence[Any]) -> str | None:
    """The ``maxmemory-policy`` the :data:`PROBE` replies name; ``None`` if both were refused."""
    config, info = replies
    if not isinstance(config, Exception):
        found = _from_config(config)
        if found is not None:
            return found
    if isinstance(info, bytes | str):
        text = info.decode() if isinstance(info, bytes) else info
        for line in text.splitlines():
            if line.startswith(_INFO_FIELD):
                return line[len(_INFO_FIELD) :].strip()
    return None


def _from_config(reply: Any) -> str | None:
    """``CONFIG GET``'s answer: a flat list (RESP2) or a map (RESP3)."""
    pairs: list[tuple[Any, Any]]
    if isinstance(reply, Mapping):
        pairs = list(reply.items())
    elif isinstance(reply, list | tuple):
        pairs = list(zip(reply[::2], reply[1::2], strict=False))
    else:
        return None
    for key, value in pairs:
        name = key.decode() if isinstance(key, bytes) else str(key)
        if name == "maxmemory-policy":
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


class EvictionGuard:
    """Judges a new connection's probe replies for one pool (``where`` names its server)."""

    def __init__(self, where: str, *, allow_evicting: bool) -> None:
        self.where = where
        self.allow_evicting = allow_evicting
        self._warned = False

    def probe(self, connection: AbstractConnection) -> None:
        """Send :data:`PROBE` on a new, logged-in ``connection`` and :meth:`check` the replies
        (an error reply, such as a renamed ``CONFIG``, is one of them)."""
        packed = connection.pack_commands(PROBE)  # type: ignore[no-untyped-call]
        connection.send_packed_command(packed, check_health=False)  # type: ignore[no-untyped-call]
        replies: list[Any] = []
        for _ in PROBE:
            try:
                replies.append(connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
        self.check(replies)

    async def aprobe(self, connection: AsyncConnection) -> None:
        """:meth:`probe` on an asyncio connection."""
        await connection.send_packed_command(connection.pack_commands(PROBE), check_health=False)
        replies: list[Any] = []
        for _ in PROBE:
            try:
                replies.append(await connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
        self.check(replies)

    def check(self, replies: Sequence[Any]) -> None:
        """Raise :class:`QueueMisconfigured` if the policy evicts (unless allowed)."""
        policy = policy_of(replies)
        if policy is None:
            if not self._warned:
                self._warned = True
                log.warning(
                    "Redis at %s refused both CONFIG GET and INFO: the hot path cannot check "
                    "that it runs maxmemory-policy noeviction; the workers check it at start",
                    self.where,
                )
            return
        if policy in EVICTING_POLICIES and not self.allow_evicting:
            raise QueueMisconfigured(
                f"Redis at {self.where} runs maxmemory-policy {policy}, which silently evicts "
                "queued candidates; nothing was enqueued. Set `maxmemory-policy noeviction` "
                "in Redis (CONFIG SET or redis.conf), or, knowing candidates can be lost, set "
                "MEMWORKER_ALLOW_EVICTING_REDIS=true"
            )


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
