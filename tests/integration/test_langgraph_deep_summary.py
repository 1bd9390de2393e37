"""The summary flush inside ``create_deep_agent``: it replaces deepagents' own summarisation by
name, flushes what that compaction evicts, and a failed summary changes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.langgraph_app.scripted import QueuedChatModel
from tests.support.memory_queue import make_enqueuer, queued
from worker.integrations.capture import Enqueuer
from worker.integrations.deepagents import DeepAgentSummaryFlush

pytestmark = pytest.mark.langgraph


def _deep_agent(enqueuer: Enqueuer, replies: int, summaries: list[Any]) -> Any:
    backend = StateBackend()
    flush = DeepAgentSummaryFlush(
        QueuedChatModel(responses=[]),
        backend=backend,
        enqueuer=enqueuer,
        trigger=("messages", 5),
        keep=("messages", 1),
        summarizer=QueuedChatModel(responses=summaries),
    )
    model = QueuedChatModel(responses=[AIMessage(f"reply {n}") for n in range(1, replies + 1)])
    return create_deep_agent(
        model=model, backend=backend, middleware=[flush], checkpointer=InMemorySaver()
    )


def _chat(agent: Any, user: str, turns: int) -> dict[str, Any]:
    """``turns`` user turns on one thread; the thread's full state (private keys included)."""
    config = {"configurable": {"thread_id": "t-" + uuid.uuid4().hex[:8], "user_id": user}}
    for n in range(1, turns + 1):
        agent.invoke({"messages": [("user", f"question {n}")]}, config)
    return dict(agent.get_state(config).values)


def test_inside_a_deep_agent_the_flush_replaces_the_builtin_and_enqueues_what_it_compacted(
    redis_url: str, key_prefix: str
) -> None:
    agent = _deep_agent(make_enqueuer(redis_url, key_prefix), 4, [AIMessage("s1"), AIMessage("s2")])

    state = _chat(agent, "u-deep", 4)

    # One summariser ran (ours, with its own model): the agent's replies came in order.
    assert [m.text for m in state["messages"] if m.type == "ai"] == [
        "reply 1", "reply 2", "reply 3", "reply 4"
    ]  # fmt: skip
    event = state["_summarization_event"]
    assert event["cutoff_index"] == 4
    assert "<summary>\ns1\n</summary>" in event["summary_message"].text
    assert [(c.text, c.source) for c in queued(redis_url, key_prefix, "user:u-deep")] == [
        ("user: question 1\nassistant: reply 1", "summary_flush"),
        ("user: question 2\nassistant: reply 2", "summary_flush"),
    ]


def test_inside_a_deep_agent_a_failing_summary_enqueues_nothing_and_the_run_completes(
    redis_url: str, key_prefix: str
) -> None:
    agent = _deep_agent(
        make_enqueuer(redis_url, key_prefix), 3, [ModelInvalidRequestError("refused")]
    )

    state = _chat(agent, "u-deep-fail", 3)

    assert [m.text for m in state["messages"] if m.type == "ai"] == [
        "reply 1",
        "reply 2",
        "reply 3",
    ]
    assert state.get("_summarization_event") is None
    assert queued(redis_url, key_prefix, "user:u-deep-fail") == []
