"""The composition root: every long-lived part of a worker process built once from settings.

Celery tasks, beat actions and CLI commands fetch the parts from :class:`Runtime` and call the
use cases of :mod:`worker.service` with them.

**Redis outages** are logged once per change of state, never once per retry. Celery's consumer
logs every reconnect attempt, with a traceback when the connection drops;
:class:`BrokerOutageFilter` lets the first record of an outage through as one line and drops
the rest until the lane is connected again. Under a supervisor (``memworker run`` and
``memworker worker``) the children say nothing about Redis and :class:`RedisWatch` in the
supervisor says it once for all of them.

>>> import logging
>>> def retry():
...     return logging.LogRecord("celery", logging.ERROR, "", 0,
...         "consumer: Cannot connect to %s: %s.", ("redis://r", "refused"), None)
>>> outage, first = BrokerOutageFilter(report=True), retry()
>>> outage.filter(first), outage.filter(retry()), outage.filter(retry())
(True, False, False)
>>> first.getMessage()[:60]
'the broker is unreachable (consumer: Cannot connect to redis'
>>> def connected():
...     return logging.LogRecord("celery", logging.INFO, "", 0, "Connected to %s", ("r",), None)
>>> back = connected()
>>> outage.filter(back), back.getMessage(), outage.filter(connected())
(True, 'the broker answers again; consuming', False)

**Sinks and sources.** :func:`load_sinks` builds the configured sinks: ``files``,
``langgraph``, or a dotted path ``package.module:Name`` naming a class with a
``from_settings(settings)`` classmethod, or any callable taking
:class:`~worker.types.SinkSettings`; either must return a :class:`~worker.connectors.base.Sink`.
:func:`scan_parts` builds what the source scan reads (:class:`~worker.service.scan.ScanParts`).

>>> from worker.settings import Settings
>>> [s.name for s in load_sinks(Settings(sinks=["files"], files_dir="mw-files").for_sinks)]
['files']

**Search.** ``make_search_tools(SqlMemorySearch(store))`` is handed no embedding model, so it
searches by full text alone even with ``MEMWORKER_EMBEDDINGS`` set.
:func:`memory_search_from_settings` builds the search the worker and ``memworker search`` run:
the configured store and embedding model (hybrid ranking; see :mod:`worker.service.search`)::

    from worker.integrations.deepagents import make_search_tools
    from worker.runtime.container import memory_search_from_settings

    tools = make_search_tools(memory_search_from_settings(), assistant_id="support-bot")
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from worker.connectors.base import ReadsEdits, Sink
from worker.connectors.files import FilesSink
from worker.connectors.inbox import LangGraphInbox
from worker.connectors.langgraph import LangGraphStoreSink, LangGraphThreads
from worker.consolidation.meaning import CachingEmbeddings, Meaning
from worker.consolidation.plan import Consolidator
from worker.errors import ConfigurationError, MemworkerError
from worker.queue.redis import REDIS_FAILURES, RedisClient, open_redis, redacted, resolve_redis_url
from worker.queue.redis_queue import RedisQueue
from worker.runtime.embeddings import build_embeddings
from worker.service.consolidate import Pipeline
from worker.service.edits import EditCheck
from worker.service.publish import SinkGate
from worker.service.scan import ScanParts
from worker.service.search import EntryEmbedder, SqlMemorySearch
from worker.service.sweep import GaugeSchedule, build_consolidator
from worker.settings import Settings, load_settings
from worker.store.memory import MemoryStore
from worker.types import SinkSettings

#: The logger of Celery's consumer, which reports lost and failed broker connections.
CONSUMER_LOGGER: Final = "celery.worker.consumer.consumer"
#: The logger that says "Connected to …" at every (re)connection.
CONNECTION_LOGGER: Final = "celery.worker.consumer.connection"

#: How the consumer's outage messages begin.
OUTAGE_MESSAGES: Final = ("consumer: Cannot connect to", "consumer: Connection to broker lost")

#: How the connection step says it is connected (at start and after each outage).
CONNECTED: Final = "Connected to "

#: What the consumer says on each reconnect that tells an operator nothing (always dropped).
RECONNECT_NOISE: Final = ("Skipping prefetch count reduction after connection restart",)

#: How often a supervisor asks Redis whether it answers: often enough that the line comes
#: within seconds of the change, rarely enough to cost nothing.
WATCH_EVERY_SECONDS: Final = 2.0

#: A ping's deadline: a Redis that does not answer within it counts as down.
PING_TIMEOUT_SECONDS: Final = 1.0


class BrokerOutageFilter(logging.Filter):
    """Passes the first outage record of an outage as one line (``report``) or none, and
    drops the consumer's retries; :meth:`recovered` ends the outage."""

    def __init__(self, *, report: bool) -> None:
        super().__init__()
        self.report = report
        self.down = False

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(RECONNECT_NOISE):
            return False
        if message.startswith(CONNECTED):
            # Every start and reconnect says it; only the end of an outage is news.
            if not (self.recovered() and self.report):
                return False
            record.msg, record.args = "the broker answers again; consuming", ()
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            return True
        if not message.startswith(OUTAGE_MESSAGES):
            return True
        first = not self.down
        self.down = True
        if not (first and self.report):
            return False
        reason = " ".join(message.splitlines()[0].split())
        record.msg = f"the broker is unreachable ({reason}); retrying until it answers"
        record.args = ()
        record.exc_info = record.exc_text = None
        return True

    def recovered(self) -> bool:
        """True once after an outage (the lane is connected again)."""
        was, self.down = self.down, False
        return was


def install_outage_filter(*, report: bool) -> BrokerOutageFilter:
    """Attach one :class:`BrokerOutageFilter` to Celery's consumer and connection loggers in
    this process; the connection logger speaks at INFO so the end of an outage is seen (the
    filter lets nothing else of it through)."""
    outage = BrokerOutageFilter(report=report)
    logging.getLogger(CONSUMER_LOGGER).addFilter(outage)
    connection = logging.getLogger(CONNECTION_LOGGER)
    connection.addFilter(outage)
    connection.setLevel(logging.INFO)
    return outage


class RedisWatch:
    """Called from a supervisor's loop: pings ``url`` every :data:`WATCH_EVERY_SECONDS` and
    calls ``say`` when Redis stops answering and when it answers again (never in between)."""

    def __init__(
        self,
        url: str,
        say: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.say = say
        self.clock = clock
        self.up = True
        self.next_at = clock() + WATCH_EVERY_SECONDS

    def __call__(self) -> None:
        now = self.clock()
        if now < self.next_at:
            return
        self.next_at = now + WATCH_EVERY_SECONDS
        reason = self._ping()
        if reason is not None and self.up:
            self.say(
                f"Redis at {redacted(self.url)} is unreachable ({reason}); the lanes and beat "
                "wait for it, nothing queued is lost"
            )
        elif reason is None and not self.up:
            self.say(f"Redis at {redacted(self.url)} answers again; the lanes resume")
        self.up = reason is None

    def _ping(self) -> str | None:
        """None when Redis answers, else why not (one line)."""
        try:
            client = open_redis(self.url, timeout=PING_TIMEOUT_SECONDS)
        except MemworkerError as exc:
            return str(exc).splitlines()[0]
        try:
            client.ping()
        except REDIS_FAILURES as exc:
            return " ".join(str(exc).split()) or type(exc).__name__
        finally:
            client.close()
        return None


def load_sinks(settings: SinkSettings) -> list[Sink]:
    """One sink per entry of ``settings.sinks``, in order; ConfigurationError on a bad entry."""
    sinks: list[Sink] = []
    seen: set[str] = set()
    for entry in settings.sinks:
        sink = _build(entry.strip(), settings)
        if sink.name in seen:
            raise ConfigurationError(f"sink {sink.name!r} is configured twice")
        seen.add(sink.name)
        sinks.append(sink)
    return sinks


def _build(entry: str, settings: SinkSettings) -> Sink:
    if entry == "files":
        return FilesSink.from_settings(settings)
    if entry == "langgraph":
        return LangGraphStoreSink.from_settings(settings)
    if ":" in entry:
        target = _import(entry)
        # A class with ``from_settings`` is built with it; anything else is called with settings.
        factory = getattr(target, "from_settings", target)
        try:
            sink: Any = factory(settings)
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"sink {entry!r} failed to start: {exc}") from exc
        if not isinstance(sink, Sink) or not isinstance(getattr(sink, "name", None), str):
            raise ConfigurationError(
                f"sink {entry!r} did not return a sink "
                "(needs name, deliver(item), erase(namespace, paths))"
            )
        return sink
    raise ConfigurationError(
        f"unknown sink {entry!r}: use 'files', 'langgraph' or a dotted path 'package.module:Class'"
    )


def _import(entry: str) -> Callable[[SinkSettings], object]:
    module_name, _, attr = entry.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"sink {entry!r}: cannot import {module_name!r}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigurationError(f"sink {entry!r}: {module_name} has no callable {attr!r}")
    return factory  # type: ignore[no-any-return]


@contextlib.contextmanager
def scan_parts(settings: Settings) -> Iterator[ScanParts]:
    """The sources the scan reads, closed afterwards: a LangGraph server's threads when
    ``settings.langgraph_url`` is set, and with the ``langgraph`` sink its store's inbox and
    the agent edits it absorbed."""
    sources = settings.for_sources
    if not sources.langgraph_url:
        yield ScanParts()
        return
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=sources.langgraph_url, api_key=sources.langgraph_api_key)
    threads = LangGraphThreads(
        client,
        assistant_key=sources.thread_assistant_key,
        max_text_bytes=sources.max_text_bytes,
        owner_key=sources.thread_owner_key,
        org_key=sources.thread_org_key,
    )
    if "langgraph" not in settings.sinks:
        yield ScanParts(threads)
        return
    sink = LangGraphStoreSink.from_settings(settings.for_sinks)
    try:
        inbox = LangGraphInbox(sink.client, sink.layout, max_text_bytes=sources.max_text_bytes)
        yield ScanParts(threads, inbox, sink)
    finally:
        sink.close()


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
        return SqlMemorySearch(self.store, self.embedder, self.meaning)

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


def memory_search_from_settings(settings: Settings | None = None) -> SqlMemorySearch:
    """The memory search of the deployment ``settings`` describe (default: the environment's
    ``MEMWORKER_*``, as :func:`~worker.settings.load_settings` reads them): over its store,
    hybrid when ``settings.embeddings`` names a model, full text otherwise.

    A wrong embedding name (malformed, a provider not installed, credentials missing) raises
    :class:`~worker.errors.ConfigurationError` here, at start-up, not on the first query.
    """
    runtime = build_runtime(settings if settings is not None else load_settings())
    return runtime.memory_search
