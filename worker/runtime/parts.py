"""Build the concrete sinks and sources from settings (the service sees only their protocols).

:func:`load_sinks` builds the configured sinks: ``files``, ``langgraph``, or a dotted path. A
built-in sink is its own module plus one line in :func:`_build`; it takes part in publish and
erase through the protocols of :mod:`worker.sinks.base`. :func:`scan_parts` builds what the
source scan reads (:class:`~worker.service.scan.ScanParts`).

A dotted path ``package.module:Name`` names a class with a ``from_settings(settings)``
classmethod, or any callable taking the sinks' slice of the settings
(:class:`~worker.slices.SinkSettings`); either must return a :class:`~worker.sinks.base.Sink`.

>>> from worker.settings import Settings
>>> [s.name for s in load_sinks(Settings(sinks=["files"], files_dir="mw-files").for_sinks)]
['files']
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any

from worker.errors import ConfigurationError
from worker.service.scan import ScanParts
from worker.settings import Settings
from worker.sinks.base import Sink
from worker.sinks.files import FilesSink
from worker.sinks.langgraph_store import LangGraphStoreSink
from worker.slices import SinkSettings
from worker.sources.inbox import LangGraphInbox
from worker.sources.langgraph_threads import LangGraphThreads


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
