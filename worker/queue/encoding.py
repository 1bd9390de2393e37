"""Turning candidates into an ``enqueue`` script call and back; shared by every client.

The hot-path clients (sync and async) and :class:`~worker.queue.redis_queue.RedisQueue` build
the same call here, so there is one definition of what an enqueue sends.

>>> from worker.models import make_candidate
>>> from worker.settings import Settings
>>> enc = EnqueueEncoder(Settings(key_prefix="mw", queue_shards=16).for_queue)
>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea")
>>> _, keys, args = enc.call(c)
>>> keys[0], args[:2]
('mw:{s8}:ns:user:u1:log', ['', 'user:u1'])
>>> decode_candidate(args[3]) == c
True

The call carries no clock, and no policy of the client's: only its shard count, checked
against the workers', and the release's default policy, used only until a worker has written
the deployment's (see :mod:`worker.queue_policy`). The script reads the server's ``TIME`` and
the deployment's policy (``<prefix>:{sN}:policy``), so a client's clock or settings change
nothing about when a namespace becomes due. ``now`` exists only as a test hook.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from worker.errors import BacklogFull, InvalidCandidate, MemworkerError, QueueMisconfigured
from worker.metrics import count_enqueued
from worker.queue.failures import translate
from worker.queue.keys import QueueLayout
from worker.queue.scripts import SCRIPTS, Arg, Call, ScriptCallError
from worker.queue_policy import QueuePolicy

if TYPE_CHECKING:
    from worker.models import Candidate

#: The error the enqueue script raises when a namespace's log is at max_pending.
BACKLOG_FULL: Final = "BACKLOG_FULL"
#: The error reply of an enqueue whose client uses another shard count than the workers.
SHARDS_MISMATCH: Final = "SHARDS_MISMATCH"

_ENQUEUE: Final = SCRIPTS["enqueue"]
#: The ARGV order :meth:`EnqueueEncoder.pack` writes without naming them (the hot path's one
#: format); checked against the script's header at import, so the two cannot drift apart.
PACKED_ARGV: Final = ("now", "namespace", "id", "candidate", "shards", "policy")
if _ENQUEUE.argv != PACKED_ARGV or _ENQUEUE.rest:
    raise ScriptCallError(
        f"lua/enqueue.lua's ARGV header lists {_ENQUEUE.argv}, but the hot path packs "
        f"{PACKED_ARGV}: change EnqueueEncoder.pack with the header"
    )

#: Namespaces whose key names are kept for the hot path. Deriving five key names costs more
#: than a dict lookup; 4096 covers the active users of one chat process, and the cache is
#: simply cleared when full (a miss only costs the derivation again).
KEYS_CACHE: Final = 4096


def to_ms(now: float | None) -> int:
    """Epoch seconds (default: this host's current time) as integer ms.

    Only for reading replies against a caller's own clock; scripts get :func:`script_now`.

    >>> to_ms(1.5)
    1500
    """
    return int((time.time() if now is None else now) * 1000)


def script_now(now: float | None) -> str | int:
    """The ``now`` argument every script takes: ``""`` (the server's ``TIME``) unless a test
    passes a time explicitly, in epoch seconds.

    >>> script_now(None), script_now(1.5)
    ('', 1500)
    """
    return "" if now is None else int(now * 1000)


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)


class Queued(Protocol):
    """What :meth:`EnqueueEncoder.settle` needs of an enqueued item: its namespace key (a
    :class:`~worker.models.Candidate`, or the hot path's pre-encoded one)."""

    @property
    def namespace(self) -> str: ...


class QueueShape(Protocol):
    """What :class:`EnqueueEncoder` reads of settings (the worker's or the client's slice)."""

    @property
    def key_prefix(self) -> str: ...
    @property
    def queue_shards(self) -> int: ...


class EnqueueEncoder:
    """Builds ``enqueue`` script calls for one deployment's settings."""

    __slots__ = ("_defaults", "_keys", "_shards", "layout")

    def __init__(self, settings: QueueShape) -> None:
        self.layout = QueueLayout(settings.key_prefix, settings.queue_shards)
        # The ARGV that never change: the shard count and the release's default policy (see
        # worker.queue_policy).
        self._shards = settings.queue_shards
        self._defaults = QueuePolicy.defaults(settings.queue_shards).packed()
        self._keys: dict[str, list[str]] = {}

    def call(self, candidate: Candidate, now: float | None = None) -> Call:
        """The enqueue script call for ``candidate`` (see ``lua/enqueue.lua``); ``now``
        (epoch seconds) is a test hook, the server's clock otherwise."""
        return _ENQUEUE.bind(
            self.layout,
            now=script_now(now),
            namespace=candidate.namespace,
            id=candidate.id,
            candidate=candidate.model_dump_json().encode(),
            shards=self._shards,
            policy=self._defaults,
        )

    def pack(self, ns: str, cid: str, payload: bytes, now: float | None = None) -> Call:
        """The same call as :meth:`call`, from a candidate's namespace, id and stored JSON
        (the hot path builds the JSON itself, see :mod:`worker.hotpath.builder`); the key
        names of a namespace are derived once."""
        keys = self._keys.get(ns)
        if keys is None:
            if len(self._keys) >= KEYS_CACHE:
                self._keys.clear()
            shard = self.layout.shard(ns)
            keys = self._keys[ns] = [self.layout.key(k, shard, ns) for k in _ENQUEUE.keys]
        args: list[Arg] = [script_now(now), ns, cid, payload, self._shards, self._defaults]
        return _ENQUEUE, keys, args

    def settle(
        self, candidates: Sequence[Queued], results: Sequence[Any], where: str = "Redis"
    ) -> None:
        """Count each candidate Redis accepted (``memworker_enqueued_total``), then raise the
        first refusal, if any, as a :class:`~worker.errors.MemworkerError`: a full backlog
        refuses only its own namespace's candidates, so the others were enqueued and are
        counted. ``where`` names the server in the error (a redacted URL)."""
        refused: tuple[str, Exception] | None = None
        accepted = 0
        for candidate, result in zip(candidates, results, strict=True):
            if isinstance(result, Exception):
                if refused is None:
                    refused = (candidate.namespace, result)
            else:
                accepted += 1
                count_enqueued(candidate.namespace)
        if refused is not None:
            namespace, error = refused
            done = None if len(candidates) == 1 else f"{accepted} of {len(candidates)}"
            raise enqueue_error(namespace, error, where, enqueued=done) from None


def enqueue_error(
    namespace: str, error: BaseException, where: str, *, enqueued: str | None = None
) -> MemworkerError:
    """What an enqueue refusal means: :class:`BacklogFull` from the script, or a Redis failure
    translated by :func:`worker.queue.failures.translate`. ``enqueued`` (``"N of M"``) says how
    many of a pipelined batch went in, where not all of them were refused."""
    message = str(error)
    if message.startswith(SHARDS_MISMATCH):
        mine, _, theirs = message.removeprefix(SHARDS_MISMATCH).strip().partition(" ")
        return QueueMisconfigured(
            f"this client splits the queue into {mine} shards (MEMWORKER_QUEUE_SHARDS) but the "
            f"workers on {where} use {theirs}; nothing was enqueued, since no sweep would ever "
            f"find it. Set MEMWORKER_QUEUE_SHARDS={theirs} for this client (or the client's "
            "queue_shards)"
        )
    if not message.startswith(BACKLOG_FULL):
        return translate(error, where)
    pending, _, limit = message.removeprefix(BACKLOG_FULL).strip().partition(" ")
    outcome = (
        "nothing was enqueued"
        if enqueued is None or enqueued.startswith("0 of")
        else f"{enqueued} candidates were enqueued, the rest refused"
    )
    return BacklogFull(
        f"namespace {namespace} already has {pending} pending candidates (limit {limit or '?'}); "
        f"{outcome}. The worker is behind or stopped: check "
        "`memworker status`, or raise MEMWORKER_MAX_PENDING_PER_NAMESPACE on the workers"
    )


def decode_candidate(raw: str | bytes, stream_id: str = "?") -> Candidate:
    """Parse a candidate's JSON as stored in the log; a corrupt entry names its stream id.

    The model (and pydantic) is imported here, on the worker's side: the hot-path clients
    use this module to encode and never decode, so they never load pydantic. Once loaded, the
    import is a dictionary lookup, next to a validation that costs microseconds.
    """
    from pydantic import ValidationError

    from worker.models import Candidate

    try:
        return Candidate.model_validate_json(raw)
    except (ValidationError, InvalidCandidate) as exc:
        raise InvalidCandidate(
            f"log entry {stream_id} is not a valid candidate ({exc}); its batch fails until "
            "it is dead-lettered, where an operator can drop it"
        ) from None
