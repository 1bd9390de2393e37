"""One beat per deployment: a lock in Redis with a heartbeat, the way RedBeat does it.

Every beat process tries to hold ``<prefix>:beat:lock`` on each loop: the holder renews it, the
others find it taken and stay on standby (they schedule nothing). A holder that dies stops
renewing; its lock expires after :data:`BEAT_LOCK_SECONDS` and the next standby to loop takes
over. ``memworker status`` shows the holder.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Final

from worker.queue.connect import REDIS_FAILURES, RedisClient
from worker.queue.encoding import seconds_to_ms
from worker.queue.failures import translate, where_of
from worker.queue.scripts import SCRIPTS

#: Lifetime of the lock without renewal. A beat loops (and renews) at least every 15 s, so two
#: missed loops in a row (a slow broker reconnect) still keep it; a dead holder is replaced
#: within this plus one standby loop.
BEAT_LOCK_SECONDS: Final = 45.0


def lock_key(key_prefix: str) -> str:
    """The lock's key.

    >>> lock_key("mw")
    'mw:beat:lock'
    """
    return f"{key_prefix}:beat:lock"


class BeatLock:
    """This process's claim on the deployment's beat lock."""

    def __init__(
        self, client: RedisClient, key_prefix: str, *, ttl_seconds: float = BEAT_LOCK_SECONDS
    ) -> None:
        self.client = client
        self.key = lock_key(key_prefix)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.ttl_seconds = ttl_seconds
        self._ttl_ms = seconds_to_ms(ttl_seconds)

    def hold(self) -> bool:
        """Take or renew the lock; False while another beat holds it."""
        return self._call("hold")

    def release(self) -> bool:
        """Give the lock up (on a clean shutdown), so a standby takes over at once."""
        return self._call("release")

    def _call(self, mode: str) -> bool:
        try:
            reply = SCRIPTS["beat_lock"].call(
                self.client, [self.key], [self.token, self._ttl_ms, mode]
            )
        except REDIS_FAILURES as exc:
            raise translate(exc, where_of(self.client)) from exc
        return bool(reply)


def beat_holder(client: RedisClient, key_prefix: str) -> str | None:
    """Who holds the beat lock (``host:pid:…``), or None when no beat runs."""
    try:
        value = client.get(lock_key(key_prefix))
    except REDIS_FAILURES as exc:
        raise translate(exc, where_of(client)) from exc
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
