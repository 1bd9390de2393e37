"""The summarisation flush: compacted messages become turn candidates only after a summary."""

from __future__ import annotations

import uuid

import pytest
from langchain.agents import create_agent
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.langgraph_app.scripted import QueuedChatModel
from tests.langgraph_fixtures import free_port
from tests.support.memory_queue import make_enqueuer, queued
from worker.hotpath.client import MemoryClient
from worker.integrations.enqueuer import Enqueuer
from worker.integrations.summary_flush import MemorySummaryFlush

pytestmark = pytest.mark.langgraph


def _agent(enqueuer: Enqueuer, replies: int, summaries: list[AIMessage | Exception]) -> object:
    flush = MemorySummaryFlush(
        QueuedChatModel(responses=summaries),
        enqueuer=enqueuer,
        trigger=("messages", 5),
        keep=("messages", 1),
    )
    model = QueuedChatModel(responses=[AIMessage(f"reply {n}") for n in range(1, replies + 1)])
    return create_agent(model, middleware=[flush], checkpointer=InMemorySaver())


def _chat(agent: object, user: str, turns: int) -> dict[str, object]:
    config = {"configurable": {"thread_id": "t-" + uuid.uuid4().hex[:8], "user_id": user}}
    state: dict[str, object] = {}
    for n in range(1, turns + 1):
        state = agent.invoke({"messages": [("user", f"question {n}")]}, config)  # type: ignore[attr-defined]
    return state


def test_two_compactions_enqueue_each_compacted_exchange_once(
    redis_url: str, key_prefix: str
) -> None:
    agent = _agent(make_enqueuer(redis_url, key_prefix), 5, [AIMessage("s1"), AIMessage("s2")])
    _chat(agent, "u-sum", 5)

    texts = [(c.text, c.source) for c in queued(redis_url, key_prefix, "user:u-sum")]

    assert texts == [
        (f"user: question {n}\nassistant: reply {n}", "summary_flush") for n in (1, 2, 3, 4)
    ]


def test_a_failing_summary_enqueues_nothing(redis_url: str, key_prefix: str) -> None:
    agent = _agent(make_enqueuer(redis_url, key_prefix), 3, [ModelInvalidRequestError("refused")])
    with pytest.raises(ModelInvalidRequestError):
        _chat(agent, "u-fail", 3)

    assert queued(redis_url, key_prefix, "user:u-fail") == []


def test_a_queue_outage_does_not_block_the_compaction() -> None:
    down = MemoryClient.from_url(f"redis://127.0.0.1:{free_port()}/0")
    agent = _agent(down, 3, [AIMessage("the summary")])

    state = _chat(agent, "u-down", 3)

    first = state["messages"][0]  # type: ignore[index]
    assert "the summary" in first.text
