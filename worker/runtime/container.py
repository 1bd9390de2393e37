"""Build the long-lived dependencies of a worker process from settings, once.

The composition root: Celery tasks, beat actions and CLI commands fetch the parts from here
and call the use cases of :mod:`worker.service` with them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from worker.consolidation.base import Consolidator
from worker.consolidation.meaning import CachingEmbeddings, Meaning
from worker.queue.address import resolve_redis_url
from worker.queue.connect import RedisClient, open_redis
from worker.queue.redis_queue import RedisQueue
from worker.runtime.embeddings import build_embeddings
from worker.runtime.parts import load_sinks
from worker.service.consolidate import Pipeline
from worker.service.edit_check import EditCheck
from worker.service.embed import EntryEmbedder
from worker.service.memory_search import SqlMemorySearch
from worker.service.publish import SinkGate
from worker.service.startup import build_consolidator
from worker.service.sweep import GaugeSchedule
from worker.settings import Settings
from worker.sinks.base import ReadsEdits, Sink
from worker.store.memory import MemoryStore

#: Worker-side Redis timeout: longer than the hot path's, since a sweep may wait on a busy
#: Redis, but bounded so a dead Redis fails a task instead of hanging it.
WORKER_SOCKET_TIMEOUT_SECONDS = 5.0


@dataclass
class Runtime:
    """The dependencies every task needs, built from one :class:`Settings`.

    ``request_delivery`` is how a commit asks for its publication: the Celery app sets it to
    send the delivery task to its own lane; operator commands leave it unset and publish
    themselves when they are done.
    """

    settings: Settings
    request_delivery: Callable[[], None] | None = None

    @functools.cached_property
    def redis_url(self) -> str:
        """The configured Redis, or the running embedded server (resolved on first use, so
        commands that only read SQL work without Redis)."""
        return resolve_redis_url(self.settings)

    @functools.cached_property
    def redis(self) -> RedisClient:
        return open_redis(
            self.redis_url,
            timeout=WORKER_SOCKET_TIMEOUT_SECONDS,
            retries=True,
            health_check_interval=30,
        )

    @functools.cached_property
    def queue(self) -> RedisQueue:
        return RedisQueue(self.redis, self.settings.for_queue)

    @functools.cached_property
    def store(self) -> MemoryStore:
        # SQLite (the embedded default, one process) migrates itself; a shared server database
        # is migrated by `memworker db upgrade` (a one-shot job in the compose file), so
        # workers of an older release never race a schema change.
        settings = self.settings.for_store
        url = settings.effective_database_url
        store = MemoryStore.from_url(
            url,
            create=url.startswith("sqlite"),
            connect_timeout=settings.database_connect_timeout_seconds,
            transaction_timeout=settings.database_timeout_seconds,
        )
        try:
            # One SELECT when unchanged; a changed configuration rebuilds the index once.
            store.configure_search(settings.text_search_config)
        except BaseException:
            store.dispose()
            raise
        return store

    @functools.cached_property
    def embeddings(self) -> CachingEmbeddings | None:
        """The configured embedding model (the shipped local one by default), or None
        (``MEMWORKER_EMBEDDINGS=none``). One per process, its document vectors cached by text:
        a candidate embedded to merge it is not embedded again for the search index."""
        settings = self.settings.for_store
        built = build_embeddings(
            settings.embeddings, timeout_seconds=settings.embeddings_timeout_seconds
        )
        return None if built is None else CachingEmbeddings(built)

    @functools.cached_property
    def meaning(self) -> Meaning | None:
        """What merging decides "about the same thing" by (None without embeddings)."""
        if self.embeddings is None:
            return None
        timeout = self.settings.for_store.embeddings_timeout_seconds
        return Meaning(self.embeddings, deadline_seconds=timeout)

    @functools.cached_property
    def embedder(self) -> EntryEmbedder | None:
        """The configured embedding model's embedder, or None (full-text search only)."""
        settings = self.settings.for_store
        spec = settings.embeddings
        embeddings = self.embeddings
        if embeddings is None or spec is None:
            return None
        return EntryEmbedder(
            store=self.store,
            embeddings=embeddings,
            model=spec.strip(),
            timeout_seconds=settings.embeddings_timeout_seconds,
        )

    @functools.cached_property
    def memory_search(self) -> SqlMemorySearch:
        """Search over the store (hybrid when embeddings are configured)."""
        return SqlMemorySearch(self.store, self.embedder)

    @functools.cached_property
    def consolidator(self) -> Consolidator:
        # Built and checked in one place (package, credentials, base URL): one-line errors.
        return build_consolidator(self.settings.for_consolidation, meaning=self.meaning)

    @functools.cached_property
    def sinks(self) -> dict[str, Sink]:
        return {sink.name: sink for sink in load_sinks(self.settings.for_sinks)}

    @functools.cached_property
    def gauge_schedule(self) -> GaugeSchedule:
        """One per process: how often its sweeps recompute the queue gauges."""
        return GaugeSchedule()

    @functools.cached_property
    def sink_gate(self) -> SinkGate:
        """One per process: delivery passes of this worker never work on one sink at once."""
        return SinkGate()

    @functools.cached_property
    def pipeline(self) -> Pipeline:
        return Pipeline(
            queue=self.queue,
            store=self.store,
            consolidator=self.consolidator,
            settings=self.settings.for_consolidation,
            sinks=tuple(self.sinks),
            after_commit=self._after_commit,
            embedder=self.embedder,
            edits=self._edit_check(),
        )

    def _edit_check(self) -> EditCheck | None:
        """The check of agents' direct edits: with ``direct_edits`` and a sink that reads them."""
        if not self.settings.direct_edits:
            return None
        readers = [s for s in self.sinks.values() if isinstance(s, ReadsEdits)]
        return EditCheck(readers[0]) if readers else None

    def _after_commit(self) -> None:
        # Looked up at call time, so setting request_delivery after the pipeline was built works.
        if self.request_delivery is not None:
            self.request_delivery()

    def close(self) -> None:
        if "redis" in self.__dict__:
            self.redis.close()
        embedder = self.__dict__.get("embedder")
        if isinstance(embedder, EntryEmbedder):
            embedder.close()
        if "store" in self.__dict__:
            self.store.dispose()


def build_runtime(settings: Settings) -> Runtime:
    """Wire the parts; each connects on first use."""
    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    return Runtime(settings=settings)
