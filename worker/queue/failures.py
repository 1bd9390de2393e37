"""Every Redis failure as a :class:`~worker.errors.MemworkerError` that says what to do.

redis-py raises its own exceptions, and a script's error reply comes back as a bare
``ResponseError``; callers of the queue (the hot path above all) only ever see this module's
translation, so one ``except MemworkerError`` covers Redis too.

>>> import redis
>>> type(translate(redis.ResponseError("OOM command not allowed"), "redis://x")).__name__
'QueueOutOfMemory'
>>> type(translate(redis.ResponseError("MOVED 3999 10.0.0.2:6379"), "redis://x")).__name__
'QueueMisconfigured'
"""

from __future__ import annotations

import re
from typing import Any, Final

import redis
from redis import exceptions as rx
from redis.exceptions import NoScriptError

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

#: redis-py exception classes that stand for those codes (it strips the code off the message).
_CLASSES: Final = (
    (rx.AuthenticationError, "NOAUTH"),
    (rx.OutOfMemoryError, "OOM"),
    (rx.ReadOnlyError, "READONLY"),
    (rx.ClusterDownError, "CLUSTERDOWN"),
    (rx.MovedError, "MOVED"),
    (rx.AskError, "ASK"),
    (rx.ClusterCrossSlotError, "CROSSSLOT"),
)


def _code(exc: BaseException) -> str | None:
    for cls, code in _CLASSES:
        if isinstance(exc, cls):
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
    if isinstance(exc, rx.RedisClusterException) and not isinstance(exc, rx.ResponseError):
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
    if isinstance(exc, NoScriptError):
        return QueueUnavailable(
            f"Redis at {where} lost the queue's scripts again right after loading them "
            f"({message}); something keeps running SCRIPT FLUSH or restarting Redis. Nothing "
            "was written; retry once that stops"
        )
    if isinstance(exc, redis.TimeoutError):
        return QueueUnavailable(
            f"Redis at {where} did not answer in time ({message}); retry later or check its load"
        )
    if isinstance(exc, redis.ConnectionError | OSError):
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
