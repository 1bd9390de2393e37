"""The deployment's memory search, built from settings: what an agent's search tools use.

``make_search_tools(SqlMemorySearch(store))`` searches by full text alone: it is handed no
embedding model, so with ``MEMWORKER_EMBEDDINGS`` set a query such as "pet" still misses "I
have a dog named Rex". :func:`memory_search_from_settings` builds the search the worker and
``memworker search`` run: the configured store, and the configured embedding model when one
is named (hybrid ranking; see :mod:`worker.service.memory_search`)::

    from worker.integrations.search_tools import make_search_tools
    from worker.runtime.search import memory_search_from_settings

    tools = make_search_tools(memory_search_from_settings(), assistant_id="support-bot")
"""

from __future__ import annotations

from worker.runtime.container import build_runtime
from worker.service.memory_search import SqlMemorySearch
from worker.settings import Settings, load_settings


def memory_search_from_settings(settings: Settings | None = None) -> SqlMemorySearch:
    """The memory search of the deployment ``settings`` describe (default: the environment's
    ``MEMWORKER_*``, as :func:`~worker.settings.load_settings` reads them): over its store,
    hybrid when ``settings.embeddings`` names a model, full text otherwise.

    A wrong embedding name (malformed, a provider not installed, credentials missing) raises
    :class:`~worker.errors.ConfigurationError` here, at start-up, not on the first query.
    """
    runtime = build_runtime(settings if settings is not None else load_settings())
    return runtime.memory_search
