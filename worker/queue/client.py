"""The chat service's client of the queue (:class:`MemoryClient`): a candidate checked, built and
enqueued in one Redis round trip.

Enqueue arguments → the stored candidate and its script call, for both hot-path clients.

Validation is :func:`worker.models.validate_enqueue`, the same checks, in the same order, as
:func:`~worker.models.make_candidate`. What differs is the last step: instead of building a
:class:`~worker.models.Candidate` model and serialising it (``model_construct`` plus
``model_dump_json`` cost ~11 µs, a third of the client's share of an enqueue), the builder
writes the candidate's stored JSON directly, byte for byte what ``model_dump_json`` writes
(``tests/unit/test_hotpath_builder.py`` holds the two to that), with a writer generated from the
stored shape's fields (:class:`~worker.types.StoredCandidate`), and draws random ids without
``uuid.UUID``'s constructor. Nothing here imports pydantic.

>>> from worker.queue.client import ClientSettings
>>> builder = CandidateBuilder(ClientSettings(redis_url="redis://x"), "redis://x")
>>> hot = builder.candidate({"user_id": "u1", "trace_id": "t1", "text": "I prefer tea"})
>>> hot.namespace, len(hot.id)
('user:u1', 32)
>>> from worker.queue.scripts import decode_candidate
>>> decode_candidate(hot.payload).text
'I prefer tea'

The chat service's side of the queue: enqueue a candidate memory in one Redis round trip.

>>> from worker import MemoryClient
>>> with MemoryClient() as memory:  # doctest: +SKIP
...     memory.enqueue(user_id="u1", trace_id="req-42", text="I prefer tea")
'5f0c…'

``MemoryClient()`` reads the deployment's settings as the worker does: the ``MEMWORKER_*``
environment, so ``MEMWORKER_REDIS_URL`` or else the embedded server that ``memworker run``
started in ``MEMWORKER_DATA_DIR``. Constructing a client is an *edge* of the chat service, the
one place its memory settings are read, like the worker's command line; below it nothing reads
the environment. It reads only the variables it uses
(:class:`~worker.settings.ClientSettings`, which the worker's settings extend).
``MemoryClient(settings)`` takes settings built elsewhere, and
``MemoryClient.from_url(url, key_prefix=…)`` reads no environment at all (a library call;
``from_url(None)`` is ``MemoryClient()`` with overrides).

The arguments are :class:`~worker.models.EnqueueFields`, declared once for both clients,
``enqueue_many`` and the integrations. ``user_id`` and ``trace_id`` are always passed
explicitly (never read from a context variable: timers and worker threads do not inherit
them). Invalid input raises
:class:`~worker.errors.InvalidCandidate` before anything is sent; Redis trouble raises
:class:`~worker.errors.QueueUnavailable` within ``settings.socket_timeout_seconds``. A Redis
whose ``maxmemory-policy`` evicts (``allkeys-*``) is refused on every enqueue with
:class:`~worker.errors.QueueMisconfigured`, as the workers refuse to start on it (checked once
per new connection: :mod:`worker.queue.pool`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from json.encoder import encode_basestring
from types import NoneType, TracebackType, UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    NamedTuple,
    Protocol,
    Self,
    get_args,
    get_origin,
)

from worker.errors import InvalidCandidate
from worker.metrics import count_enqueued
from worker.queue.pool import (
    HOTPATH_FAILURES,
    HOTPATH_MAX_CONNECTIONS,
    HotPool,
    redacted,
    unavailable,
)
from worker.queue.redis import resolve_redis_url
from worker.queue.scripts import Call, EnqueueEncoder, QueueShape, enqueue_error
from worker.settings import ClientSettings, client_settings
from worker.types import (
    STORED_FIELDS,
    EnqueueFields,
    EnqueueValues,
    candidate_id_for,
    validate_enqueue,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ClientSettings", "MemoryClient", "client_settings"]


#: The bits ``uuid.uuid4()`` fixes (RFC 4122 variant, version 4), so a random id here is
#: the same kind of 32-hex-digit id as everywhere else.
_UUID_CLEAR: Final = ~((0xC000 << 48) | (0xF000 << 64))
_UUID_SET: Final = (0x8000 << 48) | (4 << 76)


class HotCandidate(NamedTuple):
    """A validated candidate as the queue stores it: namespace key, id and JSON."""

    namespace: str
    id: str
    payload: bytes


def random_id() -> str:
    """``uuid.uuid4().hex``, from the same ``os.urandom`` bytes, at a fifth of the cost.

    >>> import uuid
    >>> uuid.UUID(random_id()).version
    4
    """
    value = (int.from_bytes(os.urandom(16)) & _UUID_CLEAR) | _UUID_SET
    return f"{value:032x}"


def iso_utc(value: datetime) -> str:
    """A UTC time as ``model_dump_json`` writes it: ISO 8601 with ``Z`` for the UTC offset.

    >>> iso_utc(datetime(2025, 1, 1, 9, 30, tzinfo=UTC))
    '2025-01-01T09:30:00Z'
    """
    when = value.isoformat()
    return when[:-6] + "Z" if when.endswith("+00:00") else when


def _json_of(name: str, annotation: Any) -> str:
    """The expression writing the stored value ``s[name]`` of a field of type ``annotation``
    as JSON, as ``model_dump_json`` does: strings, string enums and literals, UTC datetimes
    (validated into UTC on enqueue), or ``None``."""
    value = f's["{name}"]'  # double quotes: the generated f-string is in single ones
    union = isinstance(annotation, UnionType)
    types = [t for t in get_args(annotation) if t is not NoneType] if union else [annotation]
    kind = types[0] if len(types) == 1 else None
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        text = f"q({value}.value)"
    elif kind is str or get_origin(kind) is Literal:
        text = f"q({value})"
    elif kind is datetime:
        text = f"q(t({value}))"
    else:
        raise TypeError(
            f"Candidate.{name} is a {annotation!r}; the hot path writes strings, string enums, "
            "literals and datetimes (or None): teach worker.queue.client._json_of this type"
        )
    return f'("null" if {value} is None else {text})' if union else text


def _compile_writer() -> Callable[[str, EnqueueValues, datetime], bytes]:
    """``stored_json``, generated from :class:`~worker.types.StoredCandidate`'s fields in
    declaration order (the order of :class:`~worker.models.Candidate`'s, checked there).

    Generated once at import rather than looping over the fields per call: one f-string runs
    as fast as the hand-written one it replaces, and the stored shape is declared once, without
    pydantic (``tests/unit/test_hotpath_builder.py`` holds it to ``model_dump_json``).
    """
    given = {"id": "q(cid)", "created_at": "q(when)"}
    items = [
        f'"{name}":{{{given.get(name) or _json_of(name, annotation)}}}'
        for name, annotation in STORED_FIELDS.items()
    ]
    source = (
        "def stored_json(cid, v, created_at):\n"
        "    s = v.stored\n"
        "    when = t(created_at)\n"
        f"    return f'{{{{{','.join(items)}}}}}'.encode()\n"
    )
    scope: dict[str, Any] = {"q": encode_basestring, "t": iso_utc}
    # Only names and type-derived expressions of our own model go into the source.
    exec(compile(source, "<stored_json>", "exec"), scope)
    writer: Callable[[str, EnqueueValues, datetime], bytes] = scope["stored_json"]
    writer.__doc__ = (
        "The candidate's JSON exactly as ``Candidate.model_dump_json()`` writes it (fields in "
        "model order, no spaces, non-ASCII as UTF-8): id ``cid``, the validated values ``v``, "
        "``created_at``. Every string goes through the JSON string encoder."
    )
    return writer


stored_json: Final = _compile_writer()


class ClientShape(QueueShape, Protocol):
    """What the builder reads of settings: the queue's shape and the text size limit."""

    @property
    def max_text_bytes(self) -> int: ...


class CandidateBuilder:
    """Validates enqueue arguments into stored candidates and script calls; shared by both
    clients."""

    __slots__ = ("encoder", "max_text_bytes", "where")

    def __init__(self, settings: ClientShape, url: str) -> None:
        self.encoder = EnqueueEncoder(settings)
        self.max_text_bytes = settings.max_text_bytes
        #: The server, as errors name it (password hidden); worked out once, not per enqueue.
        self.where = redacted(url)

    def candidate(self, fields: EnqueueFields) -> HotCandidate:
        """One enqueue's fields validated into a candidate (the dict is read, not copied)."""
        now = datetime.now(UTC)
        v = validate_enqueue(fields, max_text_bytes=self.max_text_bytes, now=now)
        key = v.idempotency_key
        cid = random_id() if key is None else candidate_id_for(v.namespace, key)
        return HotCandidate(v.stored["namespace"], cid, stored_json(cid, v, now))

    def candidates(self, items: Iterable[EnqueueFields]) -> list[HotCandidate]:
        """Every item validated into a candidate; the first invalid one raises, naming its
        index in ``items``."""
        out = []
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidCandidate(
                    f"enqueue_many item {index}: each item is a dict of enqueue fields "
                    f"(user_id, trace_id, text, …), got {type(item).__name__}"
                )
            try:
                out.append(self.candidate(item))
            except InvalidCandidate as exc:
                raise InvalidCandidate(f"enqueue_many item {index}: {exc}") from None
        return out

    def call(self, candidate: HotCandidate) -> Call:
        """The enqueue script call; the server stamps it with its own time."""
        return self.encoder.pack(candidate.namespace, candidate.id, candidate.payload)

    def calls(self, candidates: Iterable[HotCandidate]) -> list[Call]:
        """Enqueue script calls, in order."""
        pack = self.encoder.pack
        return [pack(c.namespace, c.id, c.payload) for c in candidates]

    def check(self, candidates: Sequence[HotCandidate], results: Sequence[Any]) -> list[str]:
        """Candidate ids, after counting each one Redis accepted in
        ``memworker_enqueued_total``; the first refusal is raised as a MemworkerError (a full
        backlog refuses only its own namespace's candidates: the others were enqueued)."""
        self.encoder.settle(candidates, results, self.where)
        return [c.id for c in candidates]

    def check_one(self, candidate: HotCandidate, result: Any) -> str:
        """:meth:`check` for a single enqueue, without the lists."""
        if isinstance(result, Exception):
            raise enqueue_error(candidate.namespace, result, self.where) from None
        count_enqueued(candidate.namespace)
        return candidate.id


class MemoryClient:
    """Thread-safe hot-path client; share one per process. Also a context manager."""

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        max_connections: int = HOTPATH_MAX_CONNECTIONS,
    ) -> None:
        """A client with ``settings``; without them, with the deployment's settings from the
        environment (``MEMWORKER_*``; see the module docstring: this is an edge). The client
        keeps its slice of them (:class:`~worker.queue.client.ClientSettings`) as
        ``settings``.

        Raises :class:`~worker.errors.ConfigurationError` for a bad setting or Redis URL
        (naming it) and :class:`~worker.errors.QueueUnavailable` when no URL is set and no
        embedded server is running (a stale socket is named as such, at once).
        """
        self.settings = client_settings() if settings is None else ClientSettings.of(settings)
        self.url = resolve_redis_url(self.settings)
        self._timeout = self.settings.socket_timeout_seconds
        self._pool = HotPool(
            self.url,
            self._timeout,
            max_connections,
            allow_evicting=self.settings.allow_evicting_redis,
        )
        self._builder = CandidateBuilder(self.settings, self.url)

    @classmethod
    def from_url(cls, url: str | None, **settings_overrides: Any) -> MemoryClient:
        """A client for Redis at ``url``, other settings from keyword arguments only (e.g.
        ``key_prefix="chat"``), the environment unread. ``url=None``: as ``MemoryClient()``,
        the environment's settings under these keyword arguments."""
        return cls(client_settings(url, **settings_overrides))

    def enqueue(self, /, **fields: Unpack[EnqueueFields]) -> str:
        """Queue one candidate memory; returns its id. One Redis round trip.

        Keyword arguments only (:class:`~worker.models.EnqueueFields`): ``user_id``,
        ``trace_id`` and ``text`` (stripped; at most ``settings.max_text_bytes``) are required.
        ``kind`` is ``fact`` (remember this, the default), ``turn`` (extract from this excerpt)
        or ``forget``; ``scope`` is ``user`` (the default: per user, and per assistant when
        ``assistant_id`` is given) or ``agent`` (shared by an assistant's users); ``org`` is
        refused here. ``topic`` hints the memory file, ``key`` names a slot for supersession,
        ``thread_id`` records the conversation, ``source`` the integration (default
        ``hot_path``). ``idempotency_key`` makes the id deterministic, so a retried capture
        merges once. An unknown or missing argument raises
        :class:`~worker.errors.InvalidCandidate` naming it.
        """
        builder = self._builder
        candidate = builder.candidate(fields)
        try:
            result = self._pool.run_one(*builder.call(candidate))
        except HOTPATH_FAILURES as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return builder.check_one(candidate, result)

    def enqueue_many(self, items: Iterable[EnqueueFields]) -> list[str]:
        """Queue several candidates in one pipelined round trip; returns their ids in order.

        Each item is a dict of :meth:`enqueue`'s keyword arguments. All items are validated
        before anything is sent. A full backlog refuses only its own namespace's items; the
        first refusal is raised after the others were enqueued.
        """
        candidates = self._builder.candidates(items)
        if not candidates:
            return []
        try:
            results = self._pool.run_script(self._builder.calls(candidates))
        except HOTPATH_FAILURES as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return self._builder.check(candidates, results)

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
