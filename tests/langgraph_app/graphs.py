"""Graphs the test LangGraph server serves. This module is an edge: it reads its environment.

- ``capture``: a LangChain agent (scripted model, one tool) with the capture middleware,
  enqueuing to the test session's Redis under the key prefix the run passes in
  ``configurable["mw_key_prefix"]`` (each test has its own prefix; the server is shared).
- ``deep``: a deep agent with a ``StoreBackend`` mounted at ``/memories/`` over the server's
  store, in the namespace the store sink writes, and ``memory=["/memories/preferences.md"]``.
- ``capture_bot``: the capture graph with ``assistant_id="capture_bot"`` (its graph id, which
  the server writes into the thread's metadata).
- ``deep_memory``: a deep agent wired by ``worker.integrations.deepagents.memory_backend``
  (assistant ``helper-bot``, org route ``/memories/policies/`` mounted at ``/policies/``), its
  permissions on; ``deep_memory_open``: the same with ``direct_edits=True``. Both run a model
  that makes the tool call the user's message scripts (``call <tool> <json>``).
"""

from __future__ import annotations

import os
from typing import Any

from deepagents import create_deep_agent
from deepagents.backends import CompositeBackend, StateBackend, StoreBackend
from langchain.agents import create_agent
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.config import get_config

from tests.langgraph_app.scripted import RuleChatModel, ToolCallChatModel
from tests.support.memory_queue import make_enqueuer
from worker.connectors.langgraph import store_namespace
from worker.connectors.layout import StoreLayout
from worker.integrations.capture import MemoryCaptureMiddleware
from worker.integrations.deepagents import memory_backend
from worker.models import Namespace

#: Set by the server fixture; the Redis the capture middleware enqueues to.
REDIS_URL = os.environ.get("MEMWORKER_TEST_GRAPH_REDIS_URL", "redis://127.0.0.1:6379/0")
PREFIX_KEY = "mw_key_prefix"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def capture(config: RunnableConfig) -> Any:
    prefix = (config.get("configurable") or {}).get(PREFIX_KEY, "mwt-unset")
    return create_agent(
        RuleChatModel(),
        tools=[get_weather],
        middleware=[MemoryCaptureMiddleware(make_enqueuer(REDIS_URL, prefix))],
    )


def capture_bot(config: RunnableConfig) -> Any:
    """The capture graph with ``assistant_id`` set to its own graph id."""
    prefix = (config.get("configurable") or {}).get(PREFIX_KEY, "mwt-unset")
    return create_agent(
        RuleChatModel(),
        tools=[get_weather],
        middleware=[
            MemoryCaptureMiddleware(make_enqueuer(REDIS_URL, prefix), assistant_id="capture_bot")
        ],
    )


def _user_namespace(runtime: Any) -> tuple[str, ...]:
    user_id = (get_config().get("configurable") or {}).get("user_id", "anonymous")
    return store_namespace(Namespace.for_user(str(user_id)))


deep = create_deep_agent(
    model=RuleChatModel(),
    memory=["/memories/preferences.md"],
    backend=CompositeBackend(
        default=StateBackend(), routes={"/memories/": StoreBackend(namespace=_user_namespace)}
    ),
)


#: The layout the helper graphs read with; tests publish with the same one.
HELPER_LAYOUT = StoreLayout(routes={"org": "/memories/policies/"})
HELPER_ASSISTANT = "helper-bot"
HELPER_FILES = ("/memories/preferences.md", "/policies/compliance.md")

deep_memory = create_deep_agent(
    model=ToolCallChatModel(),
    **memory_backend(
        HELPER_LAYOUT, assistant_id=HELPER_ASSISTANT, memory_files=HELPER_FILES
    ).agent_kwargs(),
)

deep_memory_open = create_deep_agent(
    model=ToolCallChatModel(),
    **memory_backend(
        HELPER_LAYOUT, assistant_id=HELPER_ASSISTANT, memory_files=HELPER_FILES, direct_edits=True
    ).agent_kwargs(),
)
