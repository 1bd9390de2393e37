"""The deployment's queue policy, declared once: what the workers write into every shard's
``policy`` hash and every script reads (through ``_lib.lua``'s ``policy_of``).

The hash holds one field per :class:`QueuePolicy` field, named as here; ``policy_of`` reads
them in this order (checked when the scripts are loaded). Scripts carry no defaults of their
own: a script that reads the policy is also sent a copy of it (its ``policy`` argument,
:meth:`QueuePolicy.packed`), used only for fields no worker has written yet (a fresh or
emptied Redis). The workers send their own policy (``claim`` writes it back when it is
missing); a chat host's client sends :meth:`QueuePolicy.defaults`, the release's defaults,
never its own settings, so nothing a client is configured with changes when a namespace is due.

The debounce formula itself is ``_lib.lua``'s ``due_at``: due ``quiet`` ms after the last
arrival, but no later than ``max_wait`` ms after the first.

>>> from worker.settings import Settings
>>> policy = QueuePolicy.of(Settings(debounce_seconds=5, queue_shards=4).for_queue)
>>> policy.pairs()
['quiet', 5000, 'max_wait', 300000, 'max_pending', 10000, 'shards', 4]
>>> struct.unpack(">4d", policy.packed())
(5000.0, 300000.0, 10000.0, 4.0)
>>> QueuePolicy.defaults(shards=16).quiet
30000
"""

from __future__ import annotations

import struct
from dataclasses import astuple, dataclass, fields
from typing import TYPE_CHECKING

from worker.constants import (
    DEFAULT_DEBOUNCE_SECONDS,
    DEFAULT_MAX_PENDING_PER_NAMESPACE,
    DEFAULT_MAX_WAIT_SECONDS,
)

if TYPE_CHECKING:
    from worker.slices import QueueSettings


@dataclass(frozen=True)
class QueuePolicy:
    """One deployment's debounce and backlog limit, as the scripts read them (ms, counts)."""

    #: Quiet period (ms): a namespace is due this long after its last arrival...
    quiet: int
    #: ...but at most this long (ms) after its first pending arrival.
    max_wait: int
    #: Enqueue refuses a namespace's candidate past this many pending (BacklogFull).
    max_pending: int
    #: The shard count the workers lay the queue out in; every enqueue checks the client's.
    shards: int

    @classmethod
    def of(cls, settings: QueueSettings) -> QueuePolicy:
        """The policy ``settings`` describe (the workers' settings rule the deployment)."""
        return cls(
            quiet=round(settings.debounce_seconds * 1000),
            max_wait=round(settings.max_wait_seconds * 1000),
            max_pending=settings.max_pending_per_namespace,
            shards=settings.queue_shards,
        )

    @classmethod
    def defaults(cls, shards: int) -> QueuePolicy:
        """The release's default policy for a queue of ``shards`` shards: what a client sends
        for the scripts to use until a worker has written the deployment's."""
        return cls(
            quiet=round(DEFAULT_DEBOUNCE_SECONDS * 1000),
            max_wait=round(DEFAULT_MAX_WAIT_SECONDS * 1000),
            max_pending=DEFAULT_MAX_PENDING_PER_NAMESPACE,
            shards=shards,
        )

    def pairs(self) -> list[str | int]:
        """Field/value pairs, as the hash stores them."""
        names = [f.name for f in fields(self)]
        return [item for pair in zip(names, astuple(self), strict=True) for item in pair]

    def packed(self) -> bytes:
        """The values in field order as big-endian doubles: the ``policy`` script argument.
        One argument a script reads without parsing (``struct.unpack`` where needed), since
        every argument and every string a script parses costs the hot path's enqueue."""
        values = astuple(self)
        return struct.pack(f">{len(values)}d", *values)
