"""Where the queue's Redis is: the configured URL, or the embedded server's Unix socket.

The hot-path clients, the workers and the CLI all resolve the address here, so a client that
only knows the data directory finds the server ``memworker run`` started.

>>> from worker.settings import Settings
>>> resolve_redis_url(Settings(redis_url="redis://cache:6379/0"))
'redis://cache:6379/0'

A socket file left behind by a ``memworker run`` that was killed (``kill -9``: nothing
removed it) is recognised in well under a millisecond: connecting to it is refused at once,
so it is reported as stale instead of being pinged with a timeout (and retried) for seconds.
"""

from __future__ import annotations

import contextlib
import enum
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol
from urllib.parse import unquote, urlsplit, urlunsplit

from worker.errors import ConfigurationError, QueueUnavailable

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
