"""A deep agent that reads the memory memworker merged, and proposes new memories to it.

Served by ``langgraph dev --config examples/deep_agent/langgraph.json`` beside a running
``memworker run`` (see ``examples/deep_agent/README.md``). This module is an edge: it reads its
environment once, at import.

- **Reads**: ``memory_backend`` mounts the user's memory (``StoreBackend`` over the server's
  store) at ``/memories/`` in the namespace memworker's store sink publishes to, loads
  ``/memories/preferences.md`` into the system prompt, and makes memworker's files read-only
  (deepagents permissions; ``/memories/inbox/`` stays writable).
- **Writes**: ``remember``/``forget`` tools and the capture middleware enqueue candidates to
  the same queue as ``memworker enqueue``; consolidation decides what is kept.
- **Model**: ``DEEP_AGENT_MODEL`` — ``provider:model`` for LangChain's ``init_chat_model``
  (``openai:gpt-4o-mini``, ``anthropic:claude-3-5-haiku-latest``, ``ollama:llama3.1``), or
  ``package.module:Class``, a chat model class built without arguments (the test's scripted
  model).

Every start-up problem (no model named, a provider package missing, ``memworker run`` not
started) stops the server with one line saying what to do.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from deepagents import create_deep_agent
from langchain_core.language_models import BaseChatModel

from worker.connectors.layout import StoreLayout
from worker.errors import MemworkerError
from worker.integrations.capture import MemoryCaptureMiddleware, make_memory_tools
from worker.integrations.deepagents import memory_backend
from worker.integrations.summary import chat_model_from
from worker.queue.client import MemoryClient
from worker.settings import load_settings

#: The environment variable naming the agent's chat model (not memworker's own MEMWORKER_MODEL,
#: which is the consolidator's: the two are chosen independently).
MODEL_VARIABLE = "DEEP_AGENT_MODEL"
#: The memory files loaded into the agent's system prompt on each new thread.
MEMORY_FILES = ("/memories/preferences.md",)


#: Exit status of a server stopped by a start-up problem (memworker's "bad configuration").
STARTUP_EXIT_STATUS = 2


class StartupError(Exception):
    """A start-up problem: what is wrong and what to do, in one line."""


def chat_model(spec: str | None) -> BaseChatModel:
    """The chat model ``spec`` names (see the module docstring), or one line saying why not."""
    try:
        return chat_model_from(spec, variable=MODEL_VARIABLE)
    except MemworkerError as exc:
        raise StartupError(str(exc)) from None


def memory_client() -> MemoryClient:
    """The hot-path client, on the Redis of the ``memworker run`` (or MEMWORKER_REDIS_URL)."""
    try:
        return MemoryClient()
    except MemworkerError as exc:
        raise StartupError(str(exc)) from None


def build_agent() -> Any:
    """The deep agent this example serves."""
    try:
        settings = load_settings()  # the worker's settings: the store layout it publishes with
    except MemworkerError as exc:
        raise StartupError(str(exc)) from None
    model = chat_model(os.environ.get(MODEL_VARIABLE))
    client = memory_client()
    memory = memory_backend(
        StoreLayout.from_settings(settings.for_sinks), memory_files=MEMORY_FILES
    )
    return create_deep_agent(
        model=model,
        tools=make_memory_tools(client),
        middleware=[MemoryCaptureMiddleware(client)],
        **memory.agent_kwargs(),
    )


def _served_agent() -> Any:
    """:func:`build_agent`, or one line on stderr and the server stopped: the server would
    otherwise print the problem under a page of its own traceback."""
    try:
        return build_agent()
    except StartupError as exc:
        print(f"examples/deep_agent: {exc}", file=sys.stderr, flush=True)
        os._exit(STARTUP_EXIT_STATUS)  # not SystemExit: the server would catch and re-raise it


agent = _served_agent()
