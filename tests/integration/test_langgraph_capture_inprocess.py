"""The capture middleware and memory tools inside an in-process agent, against real Redis."""

from __future__ import annotations

import uuid

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import ExecutionInfo, Runtime

from tests.langgraph_app.scripted import QueuedChatModel
from tests.langgraph_fixtures import free_port
from tests.support.memory_queue import make_enqueuer, queue_settings, queued
from worker.integrations.capture import CAPTURE_ERRORS, MemoryCaptureMiddleware, make_memory_tools
from worker.queue.async_client import AsyncMemoryClient
from worker.queue.client import MemoryClient

pytestmark = pytest.mark.langgraph


def _config(user: str) -> dict[str, object]:
    return {"configurable": {"thread_id": "t-" + uuid.uuid4().hex[:8], "user_id": user}}


def test_an_unreachable_queue_does_not_fail_the_reply() -> None:
    down = MemoryClient.from_url(f"redis://127.0.0.1:{free_port()}/0")
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("hello back")]),
        middleware=[MemoryCaptureMiddleware(down)],
        checkpointer=InMemorySaver(),
    )
    errors = CAPTURE_ERRORS.labels(integration="capture_middleware", error="QueueUnavailable")
    before = errors._value.get()

    state = agent.invoke({"messages": [("user", "hello")]}, _config("u-down"))

    assert (state["messages"][-1].text, errors._value.get()) == ("hello back", before + 1)


def test_a_retried_capture_of_the_same_run_has_the_same_candidate_id(
    redis_url: str, key_prefix: str
) -> None:
    middleware = MemoryCaptureMiddleware(make_enqueuer(redis_url, key_prefix))
    state = {"messages": [HumanMessage("hi", id="h1"), AIMessage("hello", id="a1")]}
    runtime = Runtime(
        context={"user_id": "u-retry"},
        execution_info=ExecutionInfo(
            checkpoint_id="c", checkpoint_ns="", task_id="x", thread_id="t-1", run_id="r-1"
        ),
    )

    middleware.after_agent(state, runtime)  # type: ignore[arg-type]
    middleware.after_agent(state, runtime)  # type: ignore[arg-type]

    assert len({c.id for c in queued(redis_url, key_prefix, "user:u-retry")}) == 1


async def test_an_async_run_captures_through_the_async_client(
    redis_url: str, key_prefix: str
) -> None:
    client = AsyncMemoryClient(queue_settings(redis_url, key_prefix))
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("async hello")]),
        middleware=[MemoryCaptureMiddleware(client)],
        checkpointer=InMemorySaver(),
    )

    await agent.ainvoke({"messages": [("user", "hi there")]}, _config("u-async"))

    assert [c.text for c in queued(redis_url, key_prefix, "user:u-async")] == [
        "user: hi there\nassistant: async hello"
    ]


def test_the_remember_tool_enqueues_a_fact_for_the_runs_user(
    redis_url: str, key_prefix: str
) -> None:
    call = {
        "name": "remember",
        "args": {"text": "I prefer tea", "key": "preference.drink"},
        "id": "call-1",
    }
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("Saved.")]),
        tools=make_memory_tools(make_enqueuer(redis_url, key_prefix)),
        checkpointer=InMemorySaver(),
    )

    agent.invoke({"messages": [("user", "remember I prefer tea")]}, _config("u-tool"))

    [fact] = queued(redis_url, key_prefix, "user:u-tool")
    assert (fact.kind.value, fact.text, fact.key, fact.source) == (
        "fact",
        "I prefer tea",
        "preference.drink",
        "tool",
    )


def test_the_forget_tool_enqueues_a_forget_candidate(redis_url: str, key_prefix: str) -> None:
    call = {"name": "forget", "args": {"text": "my old address"}, "id": "call-2"}
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("Done.")]),
        tools=make_memory_tools(make_enqueuer(redis_url, key_prefix)),
        checkpointer=InMemorySaver(),
    )

    agent.invoke({"messages": [("user", "forget my old address")]}, _config("u-forget"))

    assert [c.kind.value for c in queued(redis_url, key_prefix, "user:u-forget")] == ["forget"]
