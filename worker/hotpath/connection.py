"""Fail-fast Redis connections and the errors that say what to do when Redis is not there.

A chat reply must never hang on Redis. So: bounded pools that wait at most the socket timeout
for a free connection, connect/read timeouts of ``settings.socket_timeout_seconds``, and no
client-side retries (a retried timeout would multiply the worst case). The pools are
redis-py's (:mod:`worker.hotpath.pool`, :mod:`worker.hotpath.async_pool`).

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
"""

from __future__ import annotations

import ssl
from typing import Final
from urllib.parse import parse_qs, urlsplit

import redis

from worker.errors import ConfigurationError, MemworkerError, QueueUnavailable
from worker.queue.address import is_cluster_url, redacted
from worker.queue.failures import is_timeout, is_unreachable, translate

__all__ = [
    "HOTPATH_FAILURES",
    "HOTPATH_MAX_CONNECTIONS",
    "check_url",
    "redacted",
    "unavailable",
]

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
    parsed (:class:`~worker.queue.address.ClusterAddress`)."""
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
