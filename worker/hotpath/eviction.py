"""The hot path refuses an evicting Redis, as the workers do, without slowing an enqueue.

An ``allkeys-*`` ``maxmemory-policy`` deletes queued candidates under memory pressure: every
enqueue it acknowledged may be gone before a worker reads it. The workers refuse to start on
such a Redis (:func:`worker.queue.deployment.check_durability`); a chat service's client must
refuse too, or it acknowledges candidates that are then silently evicted.

The check costs one round trip **per new connection**, never per enqueue: when a pool opens a
socket (the first enqueue, and every reconnect after a restart, failover or dropped socket) it
sends :data:`PROBE` — ``CONFIG GET maxmemory-policy`` and ``INFO memory`` pipelined — right
after its handshake (redis-py's connect hook), before the socket carries any candidate. While
the policy evicts, that socket is closed and :class:`~worker.errors.QueueMisconfigured`
raised, so *every* enqueue is refused (each opens,
probes and refuses again) until Redis is fixed; then the next enqueue goes through. A policy
changed on a live server (``CONFIG SET``) is seen at the next reconnect; the workers re-check
at each start.

Managed Redis often disables ``CONFIG``: then ``INFO memory``'s ``maxmemory_policy`` field
decides. Where both are refused (an ACL user allowed only the queue's scripts), the policy
cannot be known from this side: the client then accepts, logs one warning per pool, and
leaves the verdict to the workers' start-up check (which runs with the deployment's own
credentials). ``allow_evicting_redis`` (``MEMWORKER_ALLOW_EVICTING_REDIS``) is the same
informed override for both sides.

>>> policy_of([[b"maxmemory-policy", b"allkeys-lru"], b"# Memory\\r\\nmaxmemory_policy:x\\r\\n"])
'allkeys-lru'
>>> policy_of([Exception("unknown command 'CONFIG'"), b"# Memory\\r\\nmaxmemory_policy:noeviction"])
'noeviction'
>>> policy_of([Exception("NOPERM"), Exception("NOPERM")]) is None
True
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from redis.exceptions import ResponseError

from worker.constants import EVICTING_POLICIES
from worker.errors import QueueMisconfigured

if TYPE_CHECKING:
    from redis.asyncio.connection import AbstractConnection as AsyncConnection
    from redis.connection import AbstractConnection

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
