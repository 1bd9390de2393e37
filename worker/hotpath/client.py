"""The chat service's side of the queue: enqueue a candidate memory in one Redis round trip.

>>> from worker import MemoryClient
>>> with MemoryClient.from_url("redis://127.0.0.1:6379/0") as memory:  # doctest: +SKIP
...     memory.enqueue(user_id="u1", trace_id="req-42", text="I prefer tea")
'5f0c…'

``user_id`` and ``trace_id`` are always passed explicitly (never read from a context variable:
timers and worker threads do not inherit them). Invalid input raises
:class:`~worker.errors.InvalidCandidate` before anything is sent; Redis trouble raises
:class:`~worker.errors.QueueUnavailable` within ``settings.socket_timeout_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import Any, NotRequired, Self, TypedDict

import redis
from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from worker.errors import ConfigurationError
from worker.hotpath.connection import HOTPATH_MAX_CONNECTIONS, unavailable
from worker.hotpath.pool import HotPool
from worker.models import Candidate, Source, make_candidate
from worker.queue.encoding import EnqueueEncoder, to_ms
from worker.queue.scripts import SCRIPTS
from worker.runtime.embedded_redis import resolve_redis_url
from worker.settings import Settings

_ENQUEUE = SCRIPTS["enqueue"]


class EnqueueItem(TypedDict):
    """Keyword arguments of one :meth:`MemoryClient.enqueue`, as ``enqueue_many`` takes them."""

    user_id: str | None
    trace_id: str
    text: str
    kind: NotRequired[str]
    topic: NotRequired[str | None]
    key: NotRequired[str | None]
    assistant_id: NotRequired[str | None]
    thread_id: NotRequired[str | None]
    idempotency_key: NotRequired[str | None]
    scope: NotRequired[str]
    source: NotRequired[Source]


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

    __slots__ = ("encoder", "max_text_bytes")

    def __init__(self, settings: Settings) -> None:
        self.encoder = EnqueueEncoder(settings)
        self.max_text_bytes = settings.max_text_bytes

    def candidate(self, args: EnqueueItem) -> Candidate:
        return make_candidate(max_text_bytes=self.max_text_bytes, **args)

    def calls(self, candidates: Iterable[Candidate]) -> list[bytes]:
        """Packed enqueue calls, all stamped with the current time."""
        now_ms = to_ms(None)
        return [self.encoder.packed(c, now_ms) for c in candidates]

    def check(self, candidates: list[Candidate], results: list[Any]) -> list[str]:
        """Candidate ids, or the first refusal raised (the others were enqueued)."""
        for candidate, result in zip(candidates, results, strict=True):
            if isinstance(result, Exception):
                raise self.encoder.backlog_error(candidate.namespace, result) or result
        return [c.id for c in candidates]


class MemoryClient:
    """Thread-safe hot-path client; share one per process. Also a context manager."""

    def __init__(
        self, settings: Settings, *, max_connections: int = HOTPATH_MAX_CONNECTIONS
    ) -> None:
        self.settings = settings
        self.url = resolve_redis_url(settings.redis_url, settings.data_dir)
        self._timeout = settings.socket_timeout_seconds
        self._pool = HotPool(self.url, self._timeout, max_connections)
        self._builder = CandidateBuilder(settings)

    @classmethod
    def from_url(cls, url: str, **settings_overrides: Any) -> MemoryClient:
        """A client for Redis at ``url``; other settings from keyword arguments, not the
        environment (e.g. ``key_prefix="chat"``)."""
        return cls(settings_for_url(url, **settings_overrides))

    def enqueue(
        self,
        *,
        user_id: str | None,
        trace_id: str,
        text: str,
        kind: str = "fact",
        topic: str | None = None,
        key: str | None = None,
        assistant_id: str | None = None,
        thread_id: str | None = None,
        idempotency_key: str | None = None,
        scope: str = "user",
        source: Source = "hot_path",
    ) -> str:
        """Queue one candidate memory; returns its id. One Redis round trip.

        ``kind`` is ``fact`` (remember this), ``turn`` (extract from this excerpt) or
        ``forget``; ``scope`` is ``user`` (per user, and per assistant when ``assistant_id`` is
        given) or ``agent`` (shared by an assistant's users); ``org`` is refused here.
        ``idempotency_key`` makes the id deterministic, so a retried capture merges once.
        """
        candidate = make_candidate(
            user_id=user_id,
            trace_id=trace_id,
            text=text,
            kind=kind,
            topic=topic,
            key=key,
            assistant_id=assistant_id,
            thread_id=thread_id,
            idempotency_key=idempotency_key,
            scope=scope,
            source=source,
            max_text_bytes=self._builder.max_text_bytes,
        )
        packed = self._builder.encoder.packed(candidate, to_ms(None))
        try:
            results = self._pool.run_script(_ENQUEUE, [packed])
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return self._builder.check([candidate], results)[0]

    def enqueue_many(self, items: Iterable[EnqueueItem]) -> list[str]:
        """Queue several candidates in one pipelined round trip; returns their ids in order.

        All items are validated before anything is sent. A full backlog refuses only its own
        namespace's items; the first refusal is raised after the others were enqueued.
        """
        candidates = [self._builder.candidate(item) for item in items]
        if not candidates:
            return []
        try:
            results = self._pool.run_script(_ENQUEUE, self._builder.calls(candidates))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
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
