"""The hot path's own Redis connection: one socket, RESP2, no redis-py (its asyncio twin is
:class:`~worker.hotpath.async_pool.AsyncConnection`).

A connection is opened for a URL of one server (``redis://``, ``rediss://`` or ``unix://``),
authenticates (``AUTH [user] password``) and selects its database in the same round trip,
then carries packed commands (:mod:`worker.queue.resp`) and reads back exactly as many
replies. Every connect, send and read waits at most the pool's timeout; whatever goes wrong
on the wire is an ``OSError`` (a timeout is ``TimeoutError``, a closed socket
``ConnectionError``), and an error reply is a :class:`~worker.queue.resp.ReplyError` value.

Query options of the URL: ``db`` (for ``unix://``) and, for ``rediss://``, ``ssl_cert_reqs``
(``required``, the default, ``optional`` or ``none``), ``ssl_ca_certs``, ``ssl_certfile``,
``ssl_keyfile`` and ``ssl_check_hostname``. Any other is refused, naming it: a TLS option the
client ignored would silently weaken what the URL asks for.

>>> a = NodeAddress.parse("redis://app:s%40cret@cache:6380/2")
>>> a.host, a.port, a.db, a.username, a.password
('cache', 6380, 2, 'app', 's@cret')
>>> NodeAddress.parse("unix:///run/redis.sock?db=3").path, NodeAddress.parse("rediss://c").tls
('/run/redis.sock', True)
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from time import monotonic
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit

from worker.errors import ConfigurationError
from worker.queue.address import DEFAULT_REDIS_PORT, redacted
from worker.queue.resp import Reply, ReplyBuffer, ReplyError, pack_command

#: Bytes asked of the socket per read: a reply of the hot path is tens of bytes, the eviction
#: probe's ``INFO memory`` about a kilobyte.
READ_CHUNK: Final = 65536

#: How long a send may take and the first read still get the whole timeout: the call then ends
#: at most this late. Setting a socket's timeout is two system calls, which the common case
#: (a send that returns at once) does not pay.
SEND_SLACK_SECONDS: Final = 0.001

_TLS_OPTIONS: Final = frozenset(
    {"ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname"}
)
_CERT_REQS: Final = {
    "required": ssl.CERT_REQUIRED,
    "optional": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}
_FALSE: Final = ("false", "0", "no")
#: The TLS options that take one of a few words, and those words.
_TLS_CHOICES: Final = {
    "ssl_cert_reqs": tuple(_CERT_REQS),
    "ssl_check_hostname": ("true", "1", "yes", *_FALSE),
}


@dataclass(frozen=True)
class NodeAddress:
    """Where one Redis server is and how to log in, from its URL."""

    host: str = "localhost"
    port: int = DEFAULT_REDIS_PORT
    #: The Unix socket's path (``unix://``); ``host`` and ``port`` are then unused.
    path: str | None = None
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False
    #: The TLS query options as given (``rediss://`` only).
    tls_options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, url: str) -> NodeAddress:
        """The address of ``url``; :class:`ConfigurationError` naming what is wrong."""
        try:
            parts = urlsplit(url)
            port = parts.port
            options = {k: v[-1] for k, v in parse_qs(parts.query, strict_parsing=False).items()}
            db = options.pop("db", None)
            unix = parts.scheme == "unix"
            if not unix and parts.path.strip("/"):
                db = parts.path.strip("/")
            number = int(db) if db is not None else 0
        except ValueError as exc:
            raise ConfigurationError(
                f"Redis URL {redacted(url)!r} cannot be used ({exc}); the database is a number "
                "(redis://host:6379/0, unix:///path/to/redis.sock?db=0)"
            ) from None
        tls = parts.scheme == "rediss"
        allowed = _TLS_OPTIONS if tls else frozenset()
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ConfigurationError(
                f"Redis URL {redacted(url)!r} cannot be used by the hot-path client: it does "
                f"not apply {', '.join(unknown)}. It takes db and, for rediss://, "
                f"{', '.join(sorted(_TLS_OPTIONS))}; its timeout is "
                "MEMWORKER_SOCKET_TIMEOUT_SECONDS. Remove the other options from the URL"
            )
        for name, allowed_values in _TLS_CHOICES.items():
            given = options.get(name)
            if given is not None and given.lower() not in allowed_values:
                raise ConfigurationError(
                    f"Redis URL {redacted(url)!r} cannot be used: {name} is {given!r}; use "
                    f"{' or '.join(allowed_values)}"
                )
        return cls(
            host=parts.hostname or "localhost",
            port=port or DEFAULT_REDIS_PORT,
            path=unquote(parts.path) if unix else None,
            db=number,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password is not None else None,
            tls=tls,
            tls_options=options if tls else {},
        )

    def tls_context(self) -> ssl.SSLContext | None:
        """The TLS context the URL asks for (``None`` without TLS)."""
        if not self.tls:
            return None
        o = self.tls_options
        context = ssl.create_default_context(cafile=o.get("ssl_ca_certs"))
        if "ssl_certfile" in o:
            context.load_cert_chain(o["ssl_certfile"], o.get("ssl_keyfile"))
        reqs = _CERT_REQS[o.get("ssl_cert_reqs", "required").lower()]
        check = o.get("ssl_check_hostname", "true").lower() not in _FALSE
        context.check_hostname = check and reqs != ssl.CERT_NONE
        context.verify_mode = reqs
        return context

    def handshake(self) -> tuple[bytes, int]:
        """The commands a new connection sends first (AUTH, SELECT), and their reply count."""
        packed, count = b"", 0
        if self.password is not None:
            login = (self.username.encode(),) if self.username else ()
            packed += pack_command(b"AUTH", *login, self.password.encode())
            count += 1
        if self.db:
            packed += pack_command(b"SELECT", b"%d" % self.db)
            count += 1
        return packed, count


def refused(replies: list[Reply]) -> None:
    """Raise the first error reply of a handshake (a wrong password, a missing database)."""
    for reply in replies:
        if isinstance(reply, ReplyError):
            raise reply


class Connection:
    """A blocking connection; used by one thread at a time (the pool hands it out)."""

    __slots__ = ("_replies", "_sock", "_timeout")

    def __init__(self, address: NodeAddress, timeout: float, tls: ssl.SSLContext | None) -> None:
        self._timeout = timeout
        if address.path is not None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(address.path)
            except BaseException:
                sock.close()
                raise
        else:
            sock = socket.create_connection((address.host, address.port), timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=address.host)
        sock.settimeout(timeout)
        self._sock = sock
        self._replies = ReplyBuffer()
        packed, count = address.handshake()
        if count:
            try:
                refused(self.round_trip(packed, count))
            except BaseException:
                self.close()
                raise

    def round_trip(self, packed: bytes, replies: int) -> list[Reply]:
        """Send ``packed`` and read ``replies`` (at least one) replies, all of it within the
        timeout: a reply trickling in byte by byte, each within the socket's timeout, still
        ends at the deadline, and so does one whose send waited (a large payload the server
        was slow to take). A timeout or a closed socket raises; the caller then closes this
        connection."""
        deadline = monotonic() + self._timeout
        sock, buffer = self._sock, self._replies
        sock.sendall(packed)  # the socket's timeout bounds the whole send (Python >= 3.5)
        if deadline - monotonic() > self._timeout - SEND_SLACK_SECONDS:  # the send did not wait
            buffer.feed(sock.recv(READ_CHUNK))  # one read holds every reply, nearly always
            if (out := buffer.take(replies)) is not None:
                return out
        try:
            while (out := buffer.take(replies)) is None:
                left = deadline - monotonic()
                if left <= 0:
                    raise TimeoutError(f"no whole reply from Redis within {self._timeout:g} s")
                sock.settimeout(left)
                buffer.feed(sock.recv(READ_CHUNK))
            return out
        finally:
            sock.settimeout(self._timeout)

    def close(self) -> None:
        self._replies.clear()
        self._sock.close()
