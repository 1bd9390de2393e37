"""The queue's Redis deployment: its policy, its durability, and the one beat it allows.

**Policy.** Debounce, max wait and the per-namespace backlog limit belong to the deployment,
not to whoever enqueues: the workers write them into every shard's ``policy`` hash at start
(:func:`publish_policy`), the ``claim`` script restores them after Redis lost them, and the
``enqueue`` script reads them there. A chat service's settings and clock change nothing about
when a namespace becomes due.

**Sinks.** The workers record the sinks they publish to (:func:`record_sinks`), so an operator
command run with other settings can tell that it would write what the workers' sinks never
receive (``memworker status`` shows the difference).

**Durability.** An ``allkeys-*`` policy silently evicts queued candidates under memory
pressure: refused unless ``allow_evicting_redis`` is set. No AOF means a restart loses the
queue: a loud warning (the epoch detects the loss afterwards). Managed Redis often refuses
``CONFIG``; that is tolerated and reported as unknown (:func:`check_durability`).

**One beat per deployment**, as RedBeat does it: every beat process tries to hold
``<prefix>:beat:lock`` on each loop; the holder renews it (its heartbeat), the others stay on
standby and schedule nothing. A dead holder's lock expires after :data:`BEAT_LOCK_SECONDS`;
one that died on the standby's own host (same host name and pid namespace, pid gone) is
replaced at once.

>>> Holder.parse("box:4242:1a2b3c4d:4026531836")
Holder(host='box', pid=4242, pid_namespace='4026531836')
>>> Holder.parse("box:4242:1a2b3c4d").pid_namespace is None  # an older release's token
True
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import redis
from redis.cluster import RedisCluster

from worker.errors import QueueMisconfigured
from worker.queue.redis import REDIS_FAILURES, RedisClient, translate, where_of
from worker.queue.scripts import SCRIPTS, QueueLayout, Value, call_script, s, seconds_to_ms
from worker.types import EVICTING_POLICIES

if TYPE_CHECKING:
    from worker.types import QueueSettings


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Durability:
    """What Redis said about its persistence; ``None`` where it refused ``CONFIG``."""

    appendonly: str | None
    appendfsync: str | None
    maxmemory_policy: str | None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for ``memworker status --json``."""
        return {
            "appendonly": self.appendonly,
            "appendfsync": self.appendfsync,
            "maxmemory_policy": self.maxmemory_policy,
            "warnings": list(self.warnings),
        }


def shards_key(prefix: str) -> str:
    """Where the deployment records its shard count (one key, outside every shard).

    >>> shards_key("mw")
    'mw:shards'
    """
    return f"{prefix}:shards"


def sinks_key(prefix: str) -> str:
    """Where the workers record the sinks they publish to (one key, outside every shard).

    >>> sinks_key("mw")
    'mw:sinks'
    """
    return f"{prefix}:sinks"


def record_sinks(client: RedisClient, layout: QueueLayout, sinks: Sequence[str]) -> None:
    """Record ``sinks`` (the workers' ``MEMWORKER_SINKS`` entries, in order) as the
    deployment's; the last worker to start wins, as with the policy."""
    try:
        client.set(sinks_key(layout.prefix), json.dumps([s.strip() for s in sinks]))
    except REDIS_FAILURES as exc:
        raise translate(exc, "the queue's Redis") from exc


def recorded_sinks(client: RedisClient, layout: QueueLayout) -> list[str] | None:
    """The sinks the workers recorded at start; None before any worker of this release
    started (or when the record is unreadable: nothing to compare with)."""
    try:
        raw = client.get(sinks_key(layout.prefix))
    except REDIS_FAILURES as exc:
        raise translate(exc, "the queue's Redis") from exc
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def check_shards(client: RedisClient, layout: QueueLayout) -> None:
    """Refuse a shard count other than the one the queue in Redis was laid out with, while
    that layout still holds anything: its namespaces would never be swept again.

    Raises :class:`~worker.errors.QueueMisconfigured` saying how to drain first. With an empty
    queue the new count is recorded and used.
    """
    try:
        key = shards_key(layout.prefix)
        recorded = client.get(key) or _layout_in_use(client, layout)
        # NX: of workers starting at once on a fresh Redis, the first count recorded wins and
        # the others are judged against it.
        if recorded is None and client.set(key, layout.shards, nx=True):
            return
        recorded = recorded or client.get(key) or layout.shards
        if int(recorded) == layout.shards:
            client.set(key, layout.shards)
            return
        old = QueueLayout(layout.prefix, int(recorded))
        pipe = client.pipeline(transaction=False)
        for shard in range(old.shards):
            # Every namespace with candidates is in one of these (waiting or due, leased,
            # dead-lettered), so together they say whether the old layout holds anything.
            pipe.zcard(old.due(shard))
            pipe.zcard(old.leases(shard))
            pipe.zcard(old.dead(shard))
        held = sum(int(n) for n in pipe.execute())
    except REDIS_FAILURES as exc:
        raise translate(exc, "the queue's Redis") from exc
    if held:
        raise QueueMisconfigured(
            f"MEMWORKER_QUEUE_SHARDS is {layout.shards}, but the queue in Redis is laid out in "
            f"{old.shards} shards and still holds {held} namespace(s) with candidates, which "
            "would never be swept again; refusing to start. Drain first: run the workers with "
            f"MEMWORKER_QUEUE_SHARDS={old.shards} and the chat hosts' enqueues paused until "
            "`memworker status` shows nothing pending, waiting, leased or dead, then change the "
            "setting everywhere (workers and chat hosts)"
        )
    client.set(shards_key(layout.prefix), layout.shards)


def _layout_in_use(client: RedisClient, layout: QueueLayout) -> int | None:
    """The shard count of a queue laid out before counts were recorded (an older release:
    16 shards by default), from the shards whose policy its workers wrote; None if none.

    One SCAN of the keyspace, only at a worker start that finds no recorded count.
    """
    head = f"{layout.prefix}:{{s"
    highest = -1
    for key in client.scan_iter(match=f"{head}*}}:policy", count=1000):
        tag = (key.decode() if isinstance(key, bytes) else str(key))[len(head) :]
        number = tag.partition("}")[0]
        if number.isdigit():
            highest = max(highest, int(number))
    return highest + 1 if highest >= 0 else None


def publish_policy(client: RedisClient, layout: QueueLayout, settings: QueueSettings) -> None:
    """Write the deployment's queue policy into every shard (one pipelined round trip),
    after :func:`check_shards`."""
    check_shards(client, layout)
    items = settings.queue_policy.pairs()
    pipe = client.pipeline(transaction=False)
    for shard in range(layout.shards):
        pipe.hset(layout.policy(shard), items=items)
    try:
        pipe.execute()
    except REDIS_FAILURES as exc:
        raise translate(exc, "the queue's Redis") from exc


def read_durability(client: RedisClient) -> Durability:
    """Redis's persistence settings, with a warning for each risk (no refusal here)."""
    values: dict[str, str | None] = {}
    refused: str | None = None
    for name in ("appendonly", "appendfsync", "maxmemory-policy"):
        try:
            reply = _config_get(client, name)
        except redis.ResponseError as exc:  # managed Redis: CONFIG renamed or forbidden
            refused = str(exc)
            values[name] = None
            continue
        except REDIS_FAILURES as exc:
            raise translate(exc, "the queue's Redis") from exc
        found = {s(k): s(v) for k, v in reply.items()}
        values[name] = found.get(name)
    warnings = []
    if refused is not None:
        warnings.append(
            f"Redis refused CONFIG GET ({refused}); make sure it runs with AOF and "
            "maxmemory-policy noeviction, since that cannot be checked here"
        )
    if values["appendonly"] == "no":
        warnings.append(
            "Redis runs without AOF (appendonly no): a restart loses every queued candidate. "
            "Set appendonly yes (appendfsync everysec or always); the queue epoch will report "
            "such a loss, but cannot undo it"
        )
    policy = values["maxmemory-policy"]
    if policy in EVICTING_POLICIES:
        warnings.append(
            f"Redis maxmemory-policy is {policy}: under memory pressure it deletes queued "
            "candidates. Set maxmemory-policy noeviction"
        )
    return Durability(values["appendonly"], values["appendfsync"], policy, warnings)


def _config_get(client: RedisClient, name: str) -> dict[Any, Any]:
    """CONFIG GET ``name``; on a cluster, from every primary, the weakest value winning
    (one evicting or non-persistent primary loses candidates as surely as all of them)."""
    if not isinstance(client, RedisCluster):
        return dict(client.config_get(name))
    values = set()
    for node in client.get_primaries():  # type: ignore[no-untyped-call]
        values |= {s(v) for k, v in node.redis_connection.config_get(name).items() if s(k) == name}
    return {name: min(values, key=_weakness)} if values else {}


def _weakness(value: str) -> tuple[int, str]:
    """Sort key: the value that risks most first (an evicting policy, then "no")."""
    return (0 if value in EVICTING_POLICIES else 1 if value == "no" else 2, value)


def check_durability(client: RedisClient, settings: QueueSettings) -> Durability:
    """At worker start: refuse an evicting Redis (unless overridden), log the other risks.

    Raises :class:`~worker.errors.QueueMisconfigured` for an ``allkeys-*`` policy unless
    ``settings.allow_evicting_redis``.
    """
    durability = read_durability(client)
    policy = durability.maxmemory_policy
    if policy in EVICTING_POLICIES and not settings.allow_evicting_redis:
        raise QueueMisconfigured(
            f"Redis maxmemory-policy is {policy}, which silently evicts queued candidates; "
            "refusing to start. Set `maxmemory-policy noeviction` in Redis (CONFIG SET or "
            "redis.conf), or, knowing candidates can be lost, set "
            "MEMWORKER_ALLOW_EVICTING_REDIS=true"
        )
    for warning in durability.warnings:
        log.warning("%s", warning)
    return durability


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
