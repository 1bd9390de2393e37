"""Reaching the queue's Redis: where it is, its clients, and each failure named.

**Where.** The configured URL, or the embedded server's Unix socket. The hot-path clients, the
workers and the CLI all resolve the address here, so a client that only knows the data
directory finds the server ``memworker run`` started. A socket file left behind by a killed
``memworker run`` refuses connections at once, so it is reported as stale instead of being
pinged with a timeout.

>>> from worker.settings import Settings
>>> resolve_redis_url(Settings(redis_url="redis://cache:6379/0"))
'redis://cache:6379/0'

**Clients.** One node (``redis://``, ``rediss://``, ``unix://``) or a Redis Cluster
(``redis+cluster://seed1:6379,seed2:6379``). Every part that talks to the queue opens its
client here, so a cluster URL means the same thing everywhere. redis-py's
:class:`~redis.cluster.RedisCluster` follows ``MOVED`` and ``ASK`` and refreshes its slot map
after a failover. A script touches only keys of one shard, which share a hash tag, so each call
lands on one slot.

>>> client = open_redis("redis://127.0.0.1:6379/0", timeout=1.0)
>>> is_cluster(client)
False
>>> client.close()

**Failures.** redis-py raises its own exceptions, and a script's error reply comes back as a
bare ``ResponseError``. Callers of the queue only ever see :func:`translate`'s
:class:`~worker.errors.MemworkerError`, which says what to do, so one ``except
MemworkerError`` covers Redis too.

>>> import redis
>>> type(translate(redis.ResponseError("OOM command not allowed"), "redis://x")).__name__
'QueueOutOfMemory'
>>> type(translate(redis.ResponseError("MOVED 3999 10.0.0.2:6379"), "redis://x")).__name__
'QueueMisconfigured'
"""

from __future__ import annotations

import contextlib
import enum
import re
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeAlias
from urllib.parse import unquote, urlsplit, urlunsplit

import redis
import redis.exceptions
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from worker.errors import (
    ConfigurationError,
    MemworkerError,
    QueueMisconfigured,
    QueueOutOfMemory,
    QueueReadOnly,
    QueueUnavailable,
)

#: How long a probe of the embedded socket may wait for PING's reply once connected; a local
#: server answers in microseconds. A refused connection (a stale socket) needs no wait at all.
PROBE_TIMEOUT_SECONDS: Final = 0.2

#: URL schemes redis-py connects with, and what each means (for the error naming a bad one).
REDIS_SCHEMES: Final = {"redis": "TCP", "rediss": "TLS", "unix": "a Unix socket"}

#: Schemes of a Redis Cluster: one or more seed nodes, comma-separated; the client discovers
#: the rest (``redis+cluster://10.0.0.1:6379,10.0.0.2:6379``).
CLUSTER_SCHEMES: Final = {"redis+cluster": "TCP", "rediss+cluster": "TLS"}

#: The port of a cluster seed written without one.
DEFAULT_REDIS_PORT: Final = 6379

_PING: Final = b"*1\r\n$4\r\nPING\r\n"


class SocketState(enum.Enum):
    """What a probe of a Unix socket path found."""

    ANSWERS = "answers"  #: a Redis server replied to PING
    STALE = "stale"  #: the path exists but nothing accepts connections on it
    SILENT = "silent"  #: something accepted the connection but did not answer PING in time
    ABSENT = "absent"  #: no such path


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***``, for error messages and logs.

    >>> redacted("redis://:s3cret@cache:6379/0")
    'redis://:***@cache:6379/0'
    >>> redacted("unix:///run/redis.sock")
    'unix:///run/redis.sock'
    >>> redacted("redis+cluster://app:s3cret@10.0.0.1:6379,10.0.0.2:6379")
    'redis+cluster://app:***@10.0.0.1:6379,10.0.0.2:6379'
    """
    if is_cluster_url(url):
        head, sep, rest = url.partition("://")
        auth, at, hosts = rest.rpartition("@")
        if at and ":" in auth:
            return f"{head}{sep}{auth.partition(':')[0]}:***@{hosts}"
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def socket_url(socket_path: Path) -> str:
    return f"unix://{socket_path}"


def probe_socket(sock: Path, timeout: float = PROBE_TIMEOUT_SECONDS) -> SocketState:
    """Connect to the Unix socket ``sock`` and PING it, without redis-py's retries.

    >>> probe_socket(Path("/nonexistent/redis.sock"))
    <SocketState.ABSENT: 'absent'>
    """
    if not sock.exists():
        return SocketState.ABSENT
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(sock))
        except FileNotFoundError:
            return SocketState.ABSENT
        except OSError:  # refused (no listener), not a socket, no permission: nobody home
            return SocketState.STALE
        try:
            conn.sendall(_PING)
            reply = conn.recv(64)
        except OSError:  # includes the timeout
            return SocketState.SILENT
    # "+PONG", or an error such as NOAUTH: either way a Redis server answered.
    return SocketState.ANSWERS if reply[:1] in (b"+", b"-") else SocketState.SILENT


def socket_answers(sock: Path) -> bool:
    """True when a Redis server answers PING on the Unix socket ``sock``."""
    return probe_socket(sock) is SocketState.ANSWERS


def is_cluster_url(url: str | None) -> bool:
    """True for a ``redis+cluster://`` (or ``rediss+cluster://``) URL.

    >>> is_cluster_url("redis+cluster://10.0.0.1:6379,10.0.0.2:6379"), is_cluster_url(None)
    (True, False)
    """
    return bool(url) and str(url).partition("://")[0] in CLUSTER_SCHEMES


@dataclass(frozen=True)
class ClusterAddress:
    """A parsed cluster URL: its seed nodes, credentials and whether it uses TLS.

    >>> ClusterAddress.parse("rediss+cluster://app:pw@10.0.0.1,10.0.0.2:7000").nodes
    (('10.0.0.1', 6379), ('10.0.0.2', 7000))
    """

    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    tls: bool

    @classmethod
    def parse(cls, url: str) -> ClusterAddress:
        scheme, _, rest = url.partition("://")
        netloc, _, tail = rest.partition("/")
        if tail not in ("", "0"):
            raise ConfigurationError(
                f"Redis Cluster URL {_shown(url)} names database {tail!r}; a cluster has only "
                f"database 0, so drop the path ({_CLUSTER_EXAMPLE})"
            )
        auth, _, hosts = netloc.rpartition("@")
        username, _, password = auth.partition(":") if auth else ("", "", "")
        nodes = tuple(_node(url, part) for part in hosts.split(","))
        return cls(
            nodes,
            unquote(username) or None,
            unquote(password) or None,
            CLUSTER_SCHEMES.get(scheme) == "TLS",
        )


def _node(url: str, part: str) -> tuple[str, int]:
    host, _, port = part.strip().rpartition(":") if ":" in part else (part.strip(), "", "")
    if not host or (port and not port.isdigit()):
        raise ConfigurationError(
            f"Redis Cluster URL {_shown(url)} has a malformed node {part!r}; {_CLUSTER_EXAMPLE}"
        )
    return host, int(port) if port else DEFAULT_REDIS_PORT


_CLUSTER_EXAMPLE: Final = "e.g. redis+cluster://10.0.0.1:6379,10.0.0.2:6379"


def check_redis_url(url: str) -> str:
    """``url`` if redis-py can connect with it; else :class:`ConfigurationError` saying what
    a Redis URL looks like (a bare ``ValueError`` from redis-py would not).

    >>> check_redis_url("unix:///run/redis.sock")
    'unix:///run/redis.sock'
    >>> try:
    ...     check_redis_url("http://cache:6379")
    ... except ConfigurationError as exc:
    ...     print(str(exc)[:55])
    Redis URL 'http://cache:6379' has scheme 'http'; use re
    """
    if is_cluster_url(url):
        ClusterAddress.parse(url)
        return url
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        raise ConfigurationError(
            f"Redis URL {_shown(url)} is malformed ({exc}); {_EXAMPLES}"
        ) from None
    if parts.scheme not in REDIS_SCHEMES:
        raise ConfigurationError(
            f"Redis URL {redacted(url)!r} has scheme {parts.scheme!r}; {_EXAMPLES}"
        )
    return url


_EXAMPLES: Final = (
    "use redis://host:6379/0 (TCP), rediss://host:6380/0 (TLS), unix:///path/to/redis.sock "
    "or redis+cluster://host1:6379,host2:6379 (a Redis Cluster) (MEMWORKER_REDIS_URL, or the "
    "client's url)"
)


def _shown(url: str) -> str:
    """A URL that failed to parse, for an error message: everything up to the host."""
    scheme, _, rest = url.partition("://")
    return repr(f"{scheme}://…" if "@" in rest else url)


class RedisPlace(Protocol):
    """What :func:`resolve_redis_url` reads of settings: the worker's
    :class:`~worker.settings.Settings` or the client's slice of them."""

    @property
    def redis_url(self) -> str | None: ...
    @property
    def data_dir(self) -> Path: ...
    @property
    def embedded_redis_socket(self) -> Path: ...


def resolve_redis_url(settings: RedisPlace) -> str:
    """The configured URL, or the embedded server's socket when one is running.

    Raises :class:`ConfigurationError` for a URL redis-py cannot use, and
    :class:`QueueUnavailable` with what to do when no server is there: a stale socket (left
    by a killed ``memworker run``) is named as such, at once.
    """
    if settings.redis_url:
        return check_redis_url(settings.redis_url)
    sock = settings.embedded_redis_socket
    state = probe_socket(sock)
    if state is SocketState.ANSWERS:
        return socket_url(sock)
    if state is SocketState.STALE:
        raise QueueUnavailable(
            f"{sock} is a stale socket: no embedded Redis is listening there (a `memworker "
            "run` that was killed leaves it behind). Start `memworker run` again (it removes "
            "the stale socket), or set MEMWORKER_REDIS_URL"
        )
    if state is SocketState.SILENT:
        raise QueueUnavailable(
            f"the embedded Redis on {sock} accepted a connection but did not answer within "
            f"{PROBE_TIMEOUT_SECONDS:g} s; is `memworker run` stuck? Restart it, or set "
            "MEMWORKER_REDIS_URL"
        )
    raise QueueUnavailable(
        f"no Redis configured and no embedded server running in {settings.data_dir}: start "
        "`memworker run` in another terminal, or set MEMWORKER_REDIS_URL"
    )


#: A client of the queue's Redis: a single node or a cluster (the same commands either way,
#: except that a cluster refuses pipelined scripts; see :func:`worker.queue.scripts.run_pipeline`).
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


#: Redis error codes this module names; a script's error reply carries the code of the command
#: that failed inside it (``… @user_script:42: -OOM command not allowed …``).
_CODES: Final = re.compile(
    r"(?:^|[\s:-])(OOM|READONLY|NOAUTH|WRONGPASS|NOPERM|MOVED|ASK|CLUSTERDOWN|CROSSSLOT)\b"
)

#: redis-py exception classes (by name in ``redis.exceptions``) that stand for those codes
#: (it strips the code off the message).
_CLASSES: Final = (
    ("AuthenticationError", "NOAUTH"),
    ("OutOfMemoryError", "OOM"),
    ("ReadOnlyError", "READONLY"),
    ("ClusterDownError", "CLUSTERDOWN"),
    ("MovedError", "MOVED"),
    ("AskError", "ASK"),
    ("ClusterCrossSlotError", "CROSSSLOT"),
)


def _is(exc: BaseException, name: str) -> bool:
    """``exc`` is an instance of redis-py's exception class ``name``."""
    return isinstance(exc, getattr(redis.exceptions, name))


def is_timeout(exc: BaseException) -> bool:
    """A call that got no answer in time (redis-py's timeout, or an asyncio deadline's)."""
    return isinstance(exc, TimeoutError) or _is(exc, "TimeoutError")


def is_unreachable(exc: BaseException) -> bool:
    """A connection refused, reset or lost (not a refused password or a failed TLS handshake:
    redis-py counts those as connection errors, yet Redis answered, and the configuration is
    what to fix)."""
    if _is(exc, "AuthenticationError") or tls_failure(exc) is not None:
        return False
    return isinstance(exc, OSError) or _is(exc, "ConnectionError")


def tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind ``exc``: itself, or the one redis-py's connection error was
    raised while handling."""
    for found in (exc, exc.__cause__, exc.__context__):
        if isinstance(found, ssl.SSLError):
            return found
    return None


def _code(exc: BaseException) -> str | None:
    for name, code in _CLASSES:
        if _is(exc, name):
            return code
    found = _CODES.search(str(exc))
    return found.group(1) if found else None


def translate(exc: BaseException, where: str) -> MemworkerError:
    """The named error for ``exc``, raised while talking to the Redis at ``where`` (redacted).

    Connection errors and timeouts become :class:`QueueUnavailable` here too, but the hot path
    words them itself (:func:`worker.queue.pool.unavailable`) to name its timeout.
    """
    if isinstance(exc, MemworkerError):
        return exc
    message = str(exc)
    tls = tls_failure(exc)
    if tls is not None:
        return QueueMisconfigured(
            f"Redis at {where} failed the TLS handshake ({tls}); nothing was written. If the "
            "server's certificate is signed by a CA of your own, give it as ssl_ca_certs in "
            "the URL (rediss://host:6380/0?ssl_ca_certs=/path/ca.crt); check that the URL's "
            "host is a name the certificate holds"
        )
    code = _code(exc)
    if code in ("NOAUTH", "WRONGPASS", "NOPERM"):
        return QueueMisconfigured(
            f"Redis at {where} refused our credentials ({message}); nothing was written. Fix the "
            "password or ACL user in MEMWORKER_REDIS_URL"
        )
    if code == "OOM":
        return QueueOutOfMemory(
            f"Redis at {where} is at its maxmemory limit and refuses writes ({message}); nothing "
            "was written. Raise Redis's maxmemory, or let the workers drain the queue "
            "(`memworker status`); never switch to an evicting policy, which drops candidates"
        )
    if code == "READONLY":
        return QueueReadOnly(
            f"Redis at {where} is a read-only replica ({message}); nothing was written. Point "
            "MEMWORKER_REDIS_URL at the primary (after a failover: at the new primary)"
        )
    if code in ("MOVED", "ASK", "CLUSTERDOWN") and where.startswith("redis+cluster"):
        return QueueUnavailable(
            f"the Redis Cluster {where} kept redirecting or refusing the call after its "
            f"retries ({message}): a failover or resharding is under way, or slots are not "
            "covered. Nothing was written by this call; retry once `redis-cli --cluster check` "
            "reports every slot covered"
        )
    if _is(exc, "RedisClusterException") and not _is(exc, "ResponseError"):
        return QueueUnavailable(
            f"the Redis Cluster {where} could not serve the call ({message}); nothing was "
            "written by it. Check the cluster (`redis-cli --cluster check`) and retry"
        )
    if code in ("MOVED", "ASK", "CLUSTERDOWN", "CROSSSLOT"):
        return QueueMisconfigured(
            f"Redis at {where} is a Cluster node and redirected or refused the call ({message}); "
            "nothing was written. For a Redis Cluster use a cluster URL: "
            "MEMWORKER_REDIS_URL=redis+cluster://host1:6379,host2:6379"
        )
    if _is(exc, "NoScriptError") or str(exc).startswith("NOSCRIPT"):
        return QueueUnavailable(
            f"Redis at {where} lost the queue's scripts again right after loading them "
            f"({message}); something keeps running SCRIPT FLUSH or restarting Redis. Nothing "
            "was written; retry once that stops"
        )
    if is_timeout(exc):
        return QueueUnavailable(
            f"Redis at {where} did not answer in time ({message}); retry later or check its load"
        )
    if is_unreachable(exc):
        return QueueUnavailable(
            f"Redis at {where} is unreachable ({message}); start Redis or fix MEMWORKER_REDIS_URL"
        )
    return QueueUnavailable(
        f"Redis at {where} refused a queue call ({message}); nothing was written by it. If this "
        "persists, check the Redis log and version (Redis >= 6.2 is required)"
    )


def where_of(client: Any) -> str:
    """The server ``client`` talks to, for error messages (never its password)."""
    startup = getattr(getattr(client, "nodes_manager", None), "startup_nodes", None)
    if startup:  # a RedisCluster
        return "redis+cluster://" + ",".join(sorted(startup))
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", {})
    if kwargs.get("path"):
        return f"unix://{kwargs['path']}"
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"
