"""Every Redis failure as a :class:`~worker.errors.MemworkerError` that says what to do.

redis-py raises its own exceptions, and a script's error reply comes back as a bare
``ResponseError`` (pipelines and the hot path keep it as a value). Callers of the queue (the
hot path above all) only ever see this module's translation, so one ``except
MemworkerError`` covers Redis too.

>>> import redis
>>> type(translate(redis.ResponseError("OOM command not allowed"), "redis://x")).__name__
'QueueOutOfMemory'
>>> type(translate(redis.ResponseError("MOVED 3999 10.0.0.2:6379"), "redis://x")).__name__
'QueueMisconfigured'
"""

from __future__ import annotations

import re
import ssl
from typing import Any, Final

import redis.exceptions

from worker.errors import (
    MemworkerError,
    QueueMisconfigured,
    QueueOutOfMemory,
    QueueReadOnly,
    QueueUnavailable,
)

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
    words them itself (:func:`worker.hotpath.connection.unavailable`) to name its timeout.
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
