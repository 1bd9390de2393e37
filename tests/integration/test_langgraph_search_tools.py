"""Tool mode: ``search_memory``/``read_memory`` read the run's user's committed memory only."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage

from tests.langgraph_app.scripted import QueuedChatModel
from worker.consolidation.rules import RulesConsolidator
from worker.errors import ConfigurationError
from worker.integrations.deepagents import make_search_tools
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.search import SqlMemorySearch
from worker.settings import Settings
from worker.store.memory import MemoryStore

pytestmark = pytest.mark.langgraph


def _remember(
    queue: RedisQueue, store: MemoryStore, settings: Settings, user: str, *texts: str
) -> None:
    for text in texts:
        queue.enqueue(make_candidate(user_id=user, trace_id="t1", text=text, topic="preferences"))
    claim = queue.claim_namespace(f"user:{user}")
    assert claim is not None
    pipeline = Pipeline(
        queue=queue,
        store=store,
        consolidator=RulesConsolidator.from_settings(settings.for_consolidation),
        settings=settings.for_consolidation,
        sinks=(),
    )
    assert pipeline.consolidate(claim).outcome == "committed"


def _tool_result(store: MemoryStore, user: str, tool: str, args: dict[str, Any]) -> str:
    """Run an agent whose model calls ``tool`` once for ``user``; the tool's answer."""
    call = {"name": tool, "args": args, "id": "call-1"}
    model = QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("done")])
    agent = create_agent(model, tools=make_search_tools(SqlMemorySearch(store)))
    state = agent.invoke(
        {"messages": [("user", "what do I like?")]}, {"configurable": {"user_id": user}}
    )
    return str(next(m for m in state["messages"] if m.type == "tool").text)


def test_search_memory_finds_the_users_entries_and_never_another_users(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    ann, bob = (f"u-{n}-{uuid.uuid4().hex[:6]}" for n in ("ann", "bob"))
    _remember(queue, sqlite_store, settings, ann, "prefers green tea", "lives in Oslo")
    _remember(queue, sqlite_store, settings, bob, "prefers black tea")

    found = _tool_result(sqlite_store, ann, "search_memory", {"query": "tea"})

    assert "prefers green tea (/memories/preferences.md)" in found
    assert "black" not in found
    assert "Oslo" not in found


def test_search_memory_ignores_a_user_id_the_model_slips_into_its_arguments(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    ann, bob = (f"u-{n}-{uuid.uuid4().hex[:6]}" for n in ("ann", "bob"))
    _remember(queue, sqlite_store, settings, bob, "prefers black tea")

    found = _tool_result(sqlite_store, ann, "search_memory", {"query": "tea", "user_id": bob})

    assert "black" not in found


def test_read_memory_reads_the_users_file(
    queue: RedisQueue, sqlite_store: MemoryStore, settings: Settings
) -> None:
    ann = f"u-ann-{uuid.uuid4().hex[:6]}"
    _remember(queue, sqlite_store, settings, ann, "prefers green tea")

    content = _tool_result(sqlite_store, ann, "read_memory", {"path": "preferences"})

    assert content == sqlite_store.current_files(f"user:{ann}")["/memories/preferences.md"]


def test_search_tools_without_a_search_backend_are_refused_at_start_up() -> None:
    class NoSearch:
        supports_search = False

        def search(self, namespace: str, query: str, *, limit: int) -> list[Any]:
            return []

        def read(self, namespace: str, path: str) -> str | None:
            return None

    with pytest.raises(ConfigurationError, match="offers no search"):
        make_search_tools(NoSearch())
