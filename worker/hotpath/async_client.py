"""Async twin of :class:`~worker.hotpath.client.MemoryClient`, for asyncio chat services.

>>> from worker import AsyncMemoryClient
>>> async def reply():  # doctest: +SKIP
...     async with AsyncMemoryClient() as memory:
...         return await memory.enqueue(user_id="u1", trace_id="req-42", text="Call me Sam")
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from worker.enqueue import EnqueueFields
from worker.hotpath.async_pool import AsyncHotPool
from worker.hotpath.builder import CandidateBuilder
from worker.hotpath.connection import HOTPATH_FAILURES, HOTPATH_MAX_CONNECTIONS, unavailable
from worker.hotpath.settings import ClientSettings, client_settings
from worker.queue.address import resolve_redis_url

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from worker.settings import Settings


class AsyncMemoryClient:
    """Hot-path client for one event loop; share one per process. An async context manager."""

    def __init__(
        self,
        settings: Settings | ClientSettings | None = None,
        *,
        max_connections: int = HOTPATH_MAX_CONNECTIONS,
    ) -> None:
        """See :class:`~worker.hotpath.client.MemoryClient`: without ``settings``, the
        deployment's settings from the environment (an edge of the chat service)."""
        self.settings = client_settings() if settings is None else ClientSettings.of(settings)
        self.url = resolve_redis_url(self.settings)
        self._timeout = self.settings.socket_timeout_seconds
        self._pool = AsyncHotPool(
            self.url,
            self._timeout,
            max_connections,
            allow_evicting=self.settings.allow_evicting_redis,
        )
        self._builder = CandidateBuilder(self.settings, self.url)

    @classmethod
    def from_url(cls, url: str | None, **settings_overrides: Any) -> AsyncMemoryClient:
        """As :meth:`MemoryClient.from_url <worker.hotpath.client.MemoryClient.from_url>`."""
        return cls(client_settings(url, **settings_overrides))

    async def enqueue(self, /, **fields: Unpack[EnqueueFields]) -> str:
        """Queue one candidate memory; returns its id. One Redis round trip.

        Keyword arguments only: :class:`~worker.models.EnqueueFields`, checked and described
        as in :meth:`MemoryClient.enqueue`.
        """
        builder = self._builder
        candidate = builder.candidate(fields)
        try:
            result = await self._pool.run_one(*builder.call(candidate))
        except HOTPATH_FAILURES as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return builder.check_one(candidate, result)

    async def enqueue_many(self, items: Iterable[EnqueueFields]) -> list[str]:
        """Queue several candidates (dicts of :meth:`enqueue`'s keyword arguments) in one
        pipelined round trip; see :meth:`MemoryClient.enqueue_many`."""
        candidates = self._builder.candidates(items)
        if not candidates:
            return []
        try:
            results = await self._pool.run_script(self._builder.calls(candidates))
        except HOTPATH_FAILURES as exc:
            raise unavailable(self.url, exc, self._timeout) from exc
        return self._builder.check(candidates, results)

    async def aclose(self) -> None:
        """Close the pooled connections."""
        await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
