"""The deployment's queue policy, declared once: its fields, the release's defaults, and the
form the scripts read it in.

The workers write it into every shard's ``policy`` hash (from their settings:
:attr:`worker.settings.Settings.queue_policy`) and every script reads it through
``_lib.lua``'s ``policy_of``: one hash field per :class:`QueuePolicy` field, named as here and
read in this order (checked when the scripts are loaded). Scripts carry no defaults of their
own: a script that reads the policy is also sent a copy of it (its ``policy`` argument,
:meth:`QueuePolicy.packed`), used only for fields no worker has written yet (a fresh or
emptied Redis). The workers send their own policy (``claim`` writes it back when it is
missing); a chat host's client sends :meth:`QueuePolicy.defaults`, the release's defaults,
never its own settings, so nothing a client is configured with changes when a namespace is due.

The debounce formula itself is ``_lib.lua``'s ``due_at``: due ``quiet`` ms after the last
arrival, but no later than ``max_wait`` ms after the first.

A new knob of the policy is a field here (with its release default), the setting that sets it
(``Settings`` and its :attr:`~worker.settings.Settings.queue_policy`) and its use in
``_lib.lua``.

>>> policy = QueuePolicy(quiet=5000, shards=4)
>>> policy.pairs()
['quiet', 5000, 'max_wait', 300000, 'max_pending', 10000, 'shards', 4]
>>> struct.unpack(">4d", policy.packed())
(5000.0, 300000.0, 10000.0, 4.0)
>>> QueuePolicy.defaults(shards=16).quiet
30000
"""

from __future__ import annotations

import struct
from dataclasses import astuple, dataclass, field, fields
from typing import Final

#: The release's quiet period (ms): a burst of turns in one conversation becomes one batch.
DEFAULT_QUIET_MS: Final = 30_000
#: The release's cap on debouncing (ms): a chatty user who never pauses still gets consolidated.
DEFAULT_MAX_WAIT_MS: Final = 300_000
#: The release's backlog limit per namespace: one runaway client cannot fill Redis.
DEFAULT_MAX_PENDING: Final = 10_000


@dataclass(frozen=True)
class QueuePolicy:
    """One deployment's debounce and backlog limit, as the scripts read them (ms, counts)."""

    #: Quiet period (ms): a namespace is due this long after its last arrival...
    quiet: int = DEFAULT_QUIET_MS
    #: ...but at most this long (ms) after its first pending arrival.
    max_wait: int = DEFAULT_MAX_WAIT_MS
    #: Enqueue refuses a namespace's candidate past this many pending (BacklogFull).
    max_pending: int = DEFAULT_MAX_PENDING
    #: The shard count the workers lay the queue out in; every enqueue checks the client's.
    #: No release default here: it is the deployment's layout (``Settings.queue_shards``).
    shards: int = field(kw_only=True)

    @classmethod
    def defaults(cls, shards: int) -> QueuePolicy:
        """The release's default policy for a queue of ``shards`` shards: what a client sends
        for the scripts to use until a worker has written the deployment's."""
        return cls(shards=shards)

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
