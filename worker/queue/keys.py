"""Where the queue keeps things in Redis: key names, shards and hash tags.

A namespace lives in one shard, ``zlib.crc32(namespace_key) % settings.queue_shards``. Every
key of a shard carries the same Redis Cluster hash tag ``{s<shard>}``, so each Lua script
touches a single slot and the queue runs unchanged on a cluster. ``zlib.crc32`` is used because
it is stable across processes and Python versions (``hash()`` is salted per process), fast, and
in the standard library.

Per namespace (``ns`` is the namespace key, e.g. ``user:u1``):

- ``<prefix>:{s7}:ns:<ns>:log`` — a Stream of candidates (fields ``c`` = JSON, ``i`` = id)
- ``<prefix>:{s7}:ns:<ns>:meta`` — a hash: batch arrivals, lease, fence, attempts, dead flag

Both exist only while the namespace has candidates: when its log empties they are deleted.

Per shard:

- ``<prefix>:{s7}:due`` — zset namespace → due time (ms)
- ``<prefix>:{s7}:leases`` — zset namespace → lease expiry (ms)
- ``<prefix>:{s7}:dead`` — zset namespace → dead-lettered at (ms)
- ``<prefix>:{s7}:stats`` — hash: per scope the pending candidates (``user``) and the members
  of the due, leases and dead sets (``user:due``, ``user:leased``, ``user:dead``, and
  ``user:parked`` for those in both due and leases); the id floor (``floor_ms``,
  ``floor_seq``: the last id of namespaces forgotten since); ``v``, the counters' version
- ``<prefix>:{s7}:oldest:<scope>`` — zset namespace → ms of its oldest log entry
- ``<prefix>:{s7}:fence`` — counter of lease tokens (never deleted, so never reissued)
- ``<prefix>:{s7}:epoch`` — the shard's identity, created by the first claim; a new value
  means Redis lost the shard's data (restart without AOF, flush, stale failover)
- ``<prefix>:{s7}:policy`` — hash: the deployment's quiet period, max wait and max pending

>>> layout = QueueLayout("mw", shards=16)
>>> layout.shard("user:u1")
8
>>> layout.log("user:u1")
'mw:{s8}:ns:user:u1:log'
>>> layout.due(8)
'mw:{s8}:due'
>>> layout.namespace_of_meta("mw:{s8}:ns:user:u1:meta")
'user:u1'
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Final

#: Suffixes of the per-namespace keys; the meta key is the one SCAN looks for.
LOG_SUFFIX: Final = ":log"
META_SUFFIX: Final = ":meta"

#: The keys scripts name in their KEYS headers (see :meth:`QueueLayout.key`): a namespace's
#: own, and its shard's.
NAMESPACE_KEYS: Final = frozenset({"log", "meta"})
SHARD_KEYS: Final = frozenset({"due", "leases", "dead", "stats", "fence", "epoch", "policy"})


def scope_of(namespace: str) -> str:
    """The scope of a namespace key (``user``, ``agent`` or ``org``); a user of an org
    (``org:<org>:user:<user>``) is of the user scope, as the scripts count it.

    >>> scope_of("agent:support-bot"), scope_of("org:acme"), scope_of("org:acme:user:u1")
    ('agent', 'org', 'user')
    """
    scope, _, rest = namespace.partition(":")
    if scope == "org" and rest.partition(":")[2].startswith("user:"):
        return "user"
    return scope


@dataclass(frozen=True)
class QueueLayout:
    """Key names for one deployment (``prefix``) split into ``shards`` hash-tagged shards."""

    prefix: str
    shards: int

    def shard(self, namespace: str) -> int:
        return zlib.crc32(namespace.encode()) % self.shards

    def base(self, shard: int) -> str:
        """Common start of every key of ``shard``, hash tag included (``mw:{s3}:``).

        Scripts that derive namespace keys inside Lua build them from this string, so the
        derived keys hash to the same slot as the shard keys passed in ``KEYS``.
        """
        return f"{self.prefix}:{{s{shard}}}:"

    def log(self, namespace: str) -> str:
        return f"{self.base(self.shard(namespace))}ns:{namespace}{LOG_SUFFIX}"

    def meta(self, namespace: str) -> str:
        return f"{self.base(self.shard(namespace))}ns:{namespace}{META_SUFFIX}"

    def due(self, shard: int) -> str:
        return f"{self.base(shard)}due"

    def leases(self, shard: int) -> str:
        return f"{self.base(shard)}leases"

    def dead(self, shard: int) -> str:
        return f"{self.base(shard)}dead"

    def stats(self, shard: int) -> str:
        return f"{self.base(shard)}stats"

    def oldest(self, shard: int, scope: str) -> str:
        return f"{self.base(shard)}oldest:{scope}"

    def fence(self, shard: int) -> str:
        return f"{self.base(shard)}fence"

    def epoch(self, shard: int) -> str:
        return f"{self.base(shard)}epoch"

    def policy(self, shard: int) -> str:
        return f"{self.base(shard)}policy"

    def key(self, name: str, shard: int, namespace: str | None = None) -> str:
        """The key a script header calls ``name``: of ``shard``, or of ``namespace`` (in that
        shard) for a namespace's own keys.

        >>> QueueLayout("mw", 16).key("log", 8, "user:u1"), QueueLayout("mw", 16).key("due", 8)
        ('mw:{s8}:ns:user:u1:log', 'mw:{s8}:due')
        """
        if name in SHARD_KEYS:
            return f"{self.base(shard)}{name}"
        if name in NAMESPACE_KEYS and namespace is not None:
            return f"{self.base(shard)}ns:{namespace}:{name}"
        raise KeyError(f"no queue key {name!r} for shard {shard}, namespace {namespace!r}")

    def meta_pattern(self) -> str:
        """SCAN pattern matching every namespace meta key of this deployment."""
        return f"{self.prefix}:{{s*}}:ns:*{META_SUFFIX}"

    def namespace_of_meta(self, key: str) -> str | None:
        """The namespace a meta key belongs to, or None if ``key`` is not one of ours."""
        head = f"{self.prefix}:{{s"
        if not (key.startswith(head) and key.endswith(META_SUFFIX)):
            return None
        _, sep, rest = key[len(head) :].partition("}:ns:")
        return rest[: -len(META_SUFFIX)] if sep else None
