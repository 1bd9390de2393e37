"""The chat service's client of the queue (:class:`MemoryClient`): a candidate checked, built and
enqueued in one Redis round trip.

:class:`CandidateBuilder` turns enqueue arguments into the stored candidate and its script call,
for both hot-path clients; the candidate is :func:`worker.models.build_candidate`'s
:class:`~worker.models.Candidate`, the one declaration of what the queue stores.

>>> from worker.queue.client import ClientSettings
>>> builder = CandidateBuilder(ClientSettings(redis_url="redis://x"), "redis://x")
>>> candidate = builder.candidate({"user_id": "u1", "trace_id": "t1", "text": "I prefer tea"})
>>> candidate.namespace, len(candidate.id)
('user:u1', 32)

>>> from worker import MemoryClient
>>> with MemoryClient() as memory:  # doctest: +SKIP
...     memory.enqueue(user_id="u1", trace_id="req-42", text="I prefer tea")
'5f0c…'

``MemoryClient()`` reads the deployment's settings as the worker does, from the ``MEMWORKER_*``
environment: ``MEMWORKER_REDIS_URL`` or else the embedded server that ``memworker run`` started
in ``MEMWORKER_DATA_DIR``. Constructing a client is an *edge* of the chat service, the one place
its memory settings are read (only those of :class:`~worker.settings.ClientSettings`); below it
nothing reads the environment. ``MemoryClient(settings)`` takes settings built elsewhere, and
``MemoryClient.from_url(url, key_prefix=…)`` reads no environment at all.

``user_id`` and ``trace_id`` are always passed explicitly (never read from a context variable:
timers and worker threads do not inherit them). Invalid input raises
:class:`~worker.errors.InvalidCandidate` before anything is sent; Redis trouble raises
:class:`~worker.errors.QueueUnavailable` within ``settings.socket_timeout_seconds``. A Redis
whose ``maxmemory-policy`` evicts (``allkeys-*``) is refused on every enqueue with
:class:`~worker.errors.QueueMisconfigured`, as the workers refuse to start on it (checked once
per new connection: :mod:`worker.queue.pool`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from worker.errors import InvalidCandidate
from worker.metrics import count_enqueued
from worker.models import Candidate, build_candidate
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
from worker.types import EnqueueFields

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ClientSettings", "MemoryClient", "client_settings"]


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

    def candidate(self, fields: EnqueueFields) -> Candidate:
        """One enqueue's fields validated into a candidate (the dict is read, not copied)."""
        return build_candidate(fields, max_text_bytes=self.max_text_bytes)

    def candidates(self, items: Iterable[EnqueueFields]) -> list[Candidate]:
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

    def call(self, candidate: Candidate) -> Call:
        """The enqueue script call; the server stamps it with its own time."""
        return self.encoder.call(candidate)

    def calls(self, candidates: Iterable[Candidate]) -> list[Call]:
        """Enqueue script calls, in order."""
        call = self.encoder.call
        return [call(c) for c in candidates]

    def check(self, candidates: Sequence[Candidate], results: Sequence[Any]) -> list[str]:
        """Candidate ids, after counting each one Redis accepted in
        ``memworker_enqueued_total``; the first refusal is raised as a MemworkerError (a full
        backlog refuses only its own namespace's candidates: the others were enqueued)."""
        self.encoder.settle(candidates, results, self.where)
        return [c.id for c in candidates]

    def check_one(self, candidate: Candidate, result: Any) -> str:
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
