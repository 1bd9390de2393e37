"""What the queue needs from its Redis deployment: the policy it runs under, and durability.

**Policy.** Debounce, max wait and the per-namespace backlog limit belong to the deployment,
not to whoever enqueues: the workers write them into every shard's ``policy`` hash at start
(:func:`publish_policy`), the ``claim`` script restores them after Redis lost them, and the
``enqueue`` script reads them there. A chat service's client needs only the URL and the key
prefix; its settings and its clock change nothing about when a namespace becomes due.

**Sinks.** The workers record the sinks they publish to (:func:`record_sinks`, at start), so
an operator command run with other settings can tell that it would write what the workers'
sinks never receive (``memworker status`` shows the set and any difference).

**Durability.** :func:`check_durability` reads ``CONFIG GET appendonly``, ``appendfsync`` and
``maxmemory-policy``. An ``allkeys-*`` policy evicts queue keys under memory pressure, which
silently drops acknowledged candidates: refused unless ``allow_evicting_redis`` is set. No AOF
means a restart loses the queue: a loud warning (the epoch detects the loss afterwards).
Managed Redis often refuses ``CONFIG``; that is tolerated and reported as unknown.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
from redis.cluster import RedisCluster

from worker.constants import EVICTING_POLICIES
from worker.errors import QueueMisconfigured
from worker.queue.connect import REDIS_FAILURES, RedisClient
from worker.queue.failures import translate
from worker.queue.keys import QueueLayout
from worker.queue.replies import s

if TYPE_CHECKING:
    from worker.slices import QueueSettings

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
