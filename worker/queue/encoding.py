"""Turning candidates into an ``enqueue`` script call and back; shared by every client.

The hot-path clients (sync and async) and :class:`~worker.queue.redis_queue.RedisQueue` build
the same call here, so there is one definition of what an enqueue sends.

>>> from worker.models import make_candidate
>>> from worker.settings import Settings
>>> enc = EnqueueEncoder(Settings(redis_url="redis://x", key_prefix="mw", queue_shards=16))
>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea")
>>> keys, args = enc.call(c, 1_700_000_000_000)
>>> keys[0], args[:2]
('mw:{s8}:ns:user:u1:log', [1700000000000, 'user:u1'])
>>> decode_candidate(args[3]) == c
True
>>> enc.packed(c, 1_700_000_000_000).split()[:3]
[b'*14', b'$7', b'EVALSHA']
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Final

from pydantic import ValidationError

from worker.errors import BacklogFull, InvalidCandidate
from worker.metrics import count_enqueued
from worker.models import Candidate
from worker.queue.keys import QueueLayout
from worker.queue.scripts import SCRIPTS, pack_bulk
from worker.settings import Settings

#: The error the enqueue script raises when a namespace's log is at max_pending.
BACKLOG_FULL: Final = "BACKLOG_FULL"

#: Namespaces whose packed key names are kept for the hot path. Packing four key names costs
#: more than a dict lookup; 4096 covers the active users of one chat process, and the cache
#: is simply cleared when full (a miss only costs the packing again).
PACKED_KEYS_CACHE: Final = 4096


def to_ms(now: float | None) -> int:
    """Epoch seconds (default: the current time) as the integer ms every script takes.

    >>> to_ms(1.5)
    1500
    """
    return int((time.time() if now is None else now) * 1000)


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)


class EnqueueEncoder:
    """Builds ``enqueue`` script calls for one deployment's settings."""

    __slots__ = (
        "_head",
        "_max_pending",
        "_max_wait_ms",
        "_packed_keys",
        "_quiet_ms",
        "_tail",
        "layout",
    )

    def __init__(self, settings: Settings) -> None:
        self.layout = QueueLayout(settings.key_prefix, settings.queue_shards)
        self._quiet_ms = seconds_to_ms(settings.debounce_seconds)
        self._max_wait_ms = seconds_to_ms(settings.max_wait_seconds)
        self._max_pending = settings.max_pending_per_namespace
        # The parts of a packed call that never change, packed once. 14 parts: EVALSHA, sha,
        # numkeys, 4 KEYS, 7 ARGV.
        sha = SCRIPTS["enqueue"].sha.encode()
        self._head = b"*14\r\n" + pack_bulk(b"EVALSHA", sha, b"4")
        self._tail = pack_bulk(
            b"%d" % self._quiet_ms, b"%d" % self._max_wait_ms, b"%d" % self._max_pending
        )
        self._packed_keys: dict[str, tuple[bytes, bytes]] = {}

    def call(self, candidate: Candidate, now_ms: int) -> tuple[list[str], list[str | int]]:
        """KEYS and ARGV of the enqueue script for ``candidate`` (see ``lua/enqueue.lua``)."""
        ns = candidate.namespace
        layout = self.layout
        shard = layout.shard(ns)
        base = layout.base(shard)
        keys = [f"{base}ns:{ns}:log", f"{base}ns:{ns}:meta", f"{base}due", f"{base}stats"]
        args: list[str | int] = [
            now_ms,
            ns,
            candidate.id,
            candidate.model_dump_json(),
            self._quiet_ms,
            self._max_wait_ms,
            self._max_pending,
        ]
        return keys, args

    def packed(self, candidate: Candidate, now_ms: int) -> bytes:
        """The same call as :meth:`call`, as one EVALSHA in the Redis protocol."""
        ns = candidate.namespace
        cached = self._packed_keys.get(ns)
        if cached is None:
            if len(self._packed_keys) >= PACKED_KEYS_CACHE:
                self._packed_keys.clear()
            base = self.layout.base(self.layout.shard(ns))
            keys = pack_bulk(
                f"{base}ns:{ns}:log".encode(),
                f"{base}ns:{ns}:meta".encode(),
                f"{base}due".encode(),
                f"{base}stats".encode(),
            )
            cached = self._packed_keys[ns] = (keys, pack_bulk(ns.encode()))
        keys, ns_bulk = cached
        return b"".join(
            (
                self._head,
                keys,
                pack_bulk(b"%d" % now_ms),
                ns_bulk,
                pack_bulk(candidate.id.encode(), candidate.model_dump_json().encode()),
                self._tail,
            )
        )

    def settle(self, candidates: Sequence[Candidate], results: Sequence[Any]) -> None:
        """Count each candidate Redis accepted (``memworker_enqueued_total``), then raise the
        first refusal, if any: a full backlog refuses only its own namespace's candidates, so
        the others were enqueued and are counted."""
        refused: tuple[str, Exception] | None = None
        for candidate, result in zip(candidates, results, strict=True):
            if isinstance(result, Exception):
                if refused is None:
                    refused = (candidate.namespace, result)
            else:
                count_enqueued(candidate.namespace)
        if refused is not None:
            namespace, error = refused
            raise self.backlog_error(namespace, error) or error

    def backlog_error(self, namespace: str, error: Exception) -> BacklogFull | None:
        """The :class:`BacklogFull` an enqueue script error stands for, if it is that error."""
        message = str(error)
        if not message.startswith(BACKLOG_FULL):
            return None
        pending = message.removeprefix(BACKLOG_FULL).strip()
        return BacklogFull(
            f"namespace {namespace} already has {pending} pending candidates (limit "
            f"{self._max_pending}); nothing was enqueued. The worker is behind or stopped: check "
            "`memworker status`, or raise MEMWORKER_MAX_PENDING_PER_NAMESPACE"
        )


def decode_candidate(raw: str | bytes, stream_id: str = "?") -> Candidate:
    """Parse a candidate's JSON as stored in the log; a corrupt entry names its stream id."""
    try:
        return Candidate.model_validate_json(raw)
    except (ValidationError, InvalidCandidate) as exc:
        raise InvalidCandidate(
            f"log entry {stream_id} is not a valid candidate ({exc}); its batch fails until "
            "it is dead-lettered, where an operator can drop it"
        ) from None
