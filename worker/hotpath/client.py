"""The chat service's side of the queue: enqueue a candidate memory in one Redis round trip.

>>> from worker import MemoryClient
>>> with MemoryClient.from_url("redis://127.0.0.1:6379/0") as memory:  # doctest: +SKIP
...     memory.enqueue(user_id="u1", trace_id="req-42", text="I prefer tea")
'5f0c…'

The arguments are :class:`~worker.models.EnqueueFields`, declared once for both clients,
``enqueue_many`` and the integrations. ``user_id`` and ``trace_id`` are always passed
explicitly (never read from a context variable: timers and worker threads do not inherit
them). Invalid input raises
:class:`~worker.errors.InvalidCandidate` before anything is sent; Redis trouble raises
:class:`~worker.errors.QueueUnavailable` within ``settings.socket_timeout_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Self

import redis
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from typing_extensions import Unpack

from worker.errors import ConfigurationError, InvalidCandidate
from worker.hotpath.connection import HOTPATH_MAX_CONNECTIONS, redacted, unavailable
from worker.hotpath.pool import HotPool
from worker.models import Candidate, EnqueueFields, build_candidate
from worker.queue.address import resolve_redis_url
from worker.queue.encoding import EnqueueEncoder
from worker.queue.scripts import SCRIPTS
from worker.settings import Settings

_ENQUEUE = SCRIPTS["enqueue"]


#: One item of ``enqueue_many``: the keyword arguments of one ``enqueue``, as a dict.
EnqueueItem = EnqueueFields


class _ExplicitSettings(Settings):
    """Settings from constructor arguments only: a library constructor reads no environment."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def settings_for_url(url: str, **overrides: Any) -> Settings:
    """Settings with ``redis_url=url`` and ``overrides``; the environment is not read.

    >>> settings_for_url("redis://cache:6379/0", key_prefix="chat").key_prefix
    'chat'
    """
    try:
        return _ExplicitSettings(redis_url=url, **overrides)
    except ValidationError as exc:
        raise ConfigurationError(f"invalid client settings: {exc.errors()[0]['msg']}") from None


class CandidateBuilder:
    """Validates enqueue arguments into candidates and script calls; shared by both clients."""

    __slots__ = ("encoder", "max_text_bytes", "where")

    def __init__(self, settings: Settings, url: str) -> None:
        self.encoder = EnqueueEncoder(settings)
        self.max_text_bytes = settings.max_text_bytes
        #: The server, as errors name it (password hidden); worked out once, not per enqueue.
        self.where = redacted(url)

    def candidate(self, fields: EnqueueFields) -> Candidate:
        """One enqueue's fields validated into a candidate (the dict is read, not copied)."""
        return build_candidate(fields, max_text_bytes=self.max_text_bytes)

    def candidates(self, items: Iterable[EnqueueFields]) -> list[Candidate]:
        """Every item validated into a candidate; the first invalid one raises."""
        out = []
        for item in items:
            if not isinstance(item, Mapping):
                raise InvalidCandidate(
                    "each enqueue_many item is a dict of enqueue fields (user_id, trace_id, "
                    f"text, …), got {type(item).__name__}"
                )
            out.append(self.candidate(item))
        return out

    def calls(self, candidates: Iterable[Candidate]) -> list[bytes]:
        """Packed enqueue calls; the server stamps each with its own time."""
        return [self.encoder.packed(c) for c in candidates]

    def check(self, candidates: list[Candidate], results: list[Any]) -> list[str]:
        """Candidate ids, or the first refusal raised as a MemworkerError (the others were
        enqueued and counted in ``memworker_enqueued_total``)."""
        self.encoder.settle(candidates, results, self.where)
        return [c.id for c in candidates]


class MemoryClient:
    """Thread-safe hot-path client; share one per process. Also a context manager."""

    def __init__(
        self, settings: Settings, *, max_connections: int = HOTPATH_MAX_CONNECTIONS
    ) -> None:
        self.settings = settings
        self.url = resolve_redis_url(settings)
        self._timeout = settings.socket_timeout_seconds
        self._pool = HotPool(self.url, self._timeout, max_connections)
        self._builder = CandidateBuilder(settings, self.url)

    @classmethod
    def from_url(cls, url: str, **settings_overrides: Any) -> MemoryClient:
        """A client for Redis at ``url``; other settings from keyword arguments, not the
        environment (e.g. ``key_prefix="chat"``)."""
        return cls(settings_for_url(url, **settings_overrides))

    def enqueue(self, **fields: Unpack[EnqueueFields]) -> str:
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
        candidate = self._builder.candidate(fields)
        packed = self._builder.encoder.packed(candidate)
        try:
            results = self._pool.run_script(_ENQUEUE, [packed])
        except redis.RedisError as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return self._builder.check([candidate], results)[0]

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
            results = self._pool.run_script(_ENQUEUE, self._builder.calls(candidates))
        except redis.RedisError as exc:
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
