"""What the queue needs from its Redis deployment: the policy it runs under, and durability.

**Policy.** Debounce, max wait and the per-namespace backlog limit belong to the deployment,
not to whoever enqueues: the workers write them into every shard's ``policy`` hash at start
(:func:`publish_policy`), the ``claim`` script restores them after Redis lost them, and the
``enqueue`` script reads them there. A chat service's client needs only the URL and the key
prefix; its settings and its clock change nothing about when a namespace becomes due.

**Durability.** :func:`check_durability` reads ``CONFIG GET appendonly``, ``appendfsync`` and
``maxmemory-policy``. An ``allkeys-*`` policy evicts queue keys under memory pressure, which
silently drops acknowledged candidates: refused unless ``allow_evicting_redis`` is set. No AOF
means a restart loses the queue: a loud warning (the epoch detects the loss afterwards).
Managed Redis often refuses ``CONFIG``; that is tolerated and reported as unknown.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Final

import redis

from worker.errors import QueueMisconfigured
from worker.queue.failures import translate
from worker.queue.keys import QueueLayout
from worker.queue.replies import s
from worker.settings import Settings

log = logging.getLogger(__name__)

#: ``maxmemory-policy`` values that may evict keys without a TTL, i.e. the queue's own keys.
#: ``volatile-*`` only evicts keys with an expiry, and no queue key has one.
EVICTING_POLICIES: Final = frozenset({"allkeys-lru", "allkeys-lfu", "allkeys-random"})


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


def publish_policy(client: redis.Redis, layout: QueueLayout, settings: Settings) -> None:
    """Write the deployment's queue policy into every shard (one pipelined round trip)."""
    items: list[str | int] = [
        "quiet",
        round(settings.debounce_seconds * 1000),
        "max_wait",
        round(settings.max_wait_seconds * 1000),
        "max_pending",
        settings.max_pending_per_namespace,
    ]
    pipe = client.pipeline(transaction=False)
    for shard in range(layout.shards):
        pipe.hset(layout.policy(shard), items=items)
    try:
        pipe.execute()
    except redis.RedisError as exc:
        raise translate(exc, "the queue's Redis") from exc


def read_durability(client: redis.Redis) -> Durability:
    """Redis's persistence settings, with a warning for each risk (no refusal here)."""
    values: dict[str, str | None] = {}
    refused: str | None = None
    for name in ("appendonly", "appendfsync", "maxmemory-policy"):
        try:
            reply = client.config_get(name)
        except redis.ResponseError as exc:  # managed Redis: CONFIG renamed or forbidden
            refused = str(exc)
            values[name] = None
            continue
        except redis.RedisError as exc:
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


def check_durability(client: redis.Redis, settings: Settings) -> Durability:
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
