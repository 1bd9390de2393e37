"""One beat per deployment: a lock in Redis with a heartbeat, the way RedBeat does it.

Every beat process tries to hold ``<prefix>:beat:lock`` on each loop: the holder renews it (the
renewal is its heartbeat), the others find it taken and stay on standby (they schedule
nothing). A holder that dies stops renewing; its lock expires after :data:`BEAT_LOCK_SECONDS`
and the next standby to loop takes over. A holder that died *on the standby's own host* (same
host name and process namespace, its pid gone: a restarted ``memworker run`` or beat
container finding its own predecessor's lock) is replaced at once, without waiting for the
expiry. ``memworker status`` shows the holder.

>>> Holder.parse("box:4242:1a2b3c4d:4026531836")
Holder(host='box', pid=4242, pid_namespace='4026531836')
>>> Holder.parse("box:4242:1a2b3c4d").pid_namespace is None  # an older release's token
True
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from typing import Final

from worker.queue.connect import REDIS_FAILURES, RedisClient
from worker.queue.encoding import seconds_to_ms
from worker.queue.evalsha import call_script
from worker.queue.failures import translate, where_of
from worker.queue.scripts import SCRIPTS, Value

#: Lifetime of the lock without renewal. A beat loops (and renews) at least every 15 s, so two
#: missed loops in a row (a slow broker reconnect) still keep it; a dead holder elsewhere is
#: replaced within this plus one standby loop (one on this host: at once).
BEAT_LOCK_SECONDS: Final = 45.0


def lock_key(key_prefix: str) -> str:
    """The lock's key.

    >>> lock_key("mw")
    'mw:beat:lock'
    """
    return f"{key_prefix}:beat:lock"


def pid_namespace() -> str | None:
    """This process's pid namespace (Linux), so a pid is only compared within one namespace:
    two containers may share a host name and never their pids' meaning."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    return link.partition("[")[2].rstrip("]") or None


@dataclass(frozen=True)
class Holder:
    """Who holds the lock, from its token ``host:pid:random[:pid-namespace]``."""

    host: str
    pid: int
    pid_namespace: str | None

    @classmethod
    def parse(cls, token: str) -> Holder | None:
        parts = token.split(":")
        if len(parts) < 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[3] if len(parts) > 3 else None)

    def describe(self) -> str:
        return f"the beat on {self.host} (pid {self.pid})"

    def is_dead_here(self) -> bool:
        """True only when this holder certainly died: it ran on this host, in this process
        namespace, and its pid no longer exists. Anything unsure (another host, an older
        token without a namespace, a pid in use again) is left to the lock's expiry."""
        here = pid_namespace()
        if self.host != socket.gethostname() or here is None or self.pid_namespace != here:
            return False
        if self.pid == os.getpid():
            return False  # another lock of this very process (or a reused pid): unsure
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # alive, another user's
        return False


class BeatLock:
    """This process's claim on the deployment's beat lock.

    After each :meth:`hold`, :attr:`holder` is the other beat that holds the lock (None when
    this one does) and :attr:`took_over` says whether this hold replaced a dead holder.
    """

    def __init__(
        self, client: RedisClient, key_prefix: str, *, ttl_seconds: float = BEAT_LOCK_SECONDS
    ) -> None:
        self.client = client
        self.key = lock_key(key_prefix)
        namespace = pid_namespace()
        suffix = f":{namespace}" if namespace else ""
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}{suffix}"
        self.ttl_seconds = ttl_seconds
        self._ttl_ms = seconds_to_ms(ttl_seconds)
        self.holder: Holder | None = None
        self.took_over: Holder | None = None

    def hold(self) -> bool:
        """Take or renew the lock (or take it from a holder dead on this host); False while
        another beat holds it."""
        self.took_over = None
        held, token = self._call("hold")
        if not held and token is not None:
            found = Holder.parse(token)
            if found is not None and found.is_dead_here():
                held, token = self._call("takeover", token)
                self.took_over = found if held else None
        self.holder = None if held or token is None else Holder.parse(token)
        return held

    def release(self) -> bool:
        """Give the lock up (on a clean shutdown), so a standby takes over at once."""
        return self._call("release")[0]

    def _call(self, mode: str, dead: str = "") -> tuple[bool, str | None]:
        try:
            script = SCRIPTS["beat_lock"]
            args: dict[str, Value] = {
                "token": self.token,
                "ttl": self._ttl_ms,
                "mode": mode,
                "dead": dead,
            }
            reply = call_script(self.client, script, *script.order({"lock": self.key}, args))
        except REDIS_FAILURES as exc:
            raise translate(exc, where_of(self.client)) from exc
        holder = reply[1] if len(reply) > 1 and reply[1] else None
        if isinstance(holder, bytes):
            holder = holder.decode()
        return bool(int(reply[0])), holder


def beat_holder(client: RedisClient, key_prefix: str) -> str | None:
    """Who holds the beat lock (``host:pid:…``), or None when no beat runs."""
    try:
        value = client.get(lock_key(key_prefix))
    except REDIS_FAILURES as exc:
        raise translate(exc, where_of(client)) from exc
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
