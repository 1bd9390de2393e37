"""The summarisation flush: compacted messages become turn candidates only after a summary."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.exceptions import ModelInvalidRequestError
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.langgraph_app.scripted import QueuedChatModel
from tests.langgraph_fixtures import free_port
from tests.support.memory_queue import make_enqueuer, queued
from worker.integrations.capture import Enqueuer
from worker.integrations.summary import SUMMARY_FAILURES, SUMMARY_TAG, MemorySummaryFlush
from worker.queue.client import MemoryClient

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


def test_a_failing_summary_model_leaves_the_run_uncompacted_and_enqueues_nothing(
    redis_url: str, key_prefix: str
) -> None:
    before = _failures("error")
    agent = _agent(make_enqueuer(redis_url, key_prefix), 3, [ModelInvalidRequestError("refused")])

    state = _chat(agent, "u-fail", 3)

    texts = [m.text for m in state["messages"]]  # type: ignore[attr-defined]
    assert texts == ["question 1", "reply 1", "question 2", "reply 2", "question 3", "reply 3"]
    assert queued(redis_url, key_prefix, "user:u-fail") == []
    assert _failures("error") == before + 1


def test_an_empty_summary_is_a_failure_that_changes_nothing(
    redis_url: str, key_prefix: str
) -> None:
    before = _failures("empty")
    agent = _agent(make_enqueuer(redis_url, key_prefix), 3, [AIMessage("  \n ")])

    state = _chat(agent, "u-empty", 3)

    assert len(state["messages"]) == 6  # type: ignore[arg-type]
    assert queued(redis_url, key_prefix, "user:u-empty") == []
    assert _failures("empty") == before + 1


class _Tags(BaseCallbackHandler):
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.calls.append(list(kwargs.get("tags") or []))


def test_the_summary_call_is_tagged_for_attribution_and_not_streamed(
    redis_url: str, key_prefix: str
) -> None:
    agent = _agent(make_enqueuer(redis_url, key_prefix), 3, [AIMessage("the summary")])
    tags = _Tags()
    config = {"configurable": {"thread_id": "t-tags", "user_id": "u-tags"}, "callbacks": [tags]}

    for n in (1, 2, 3):
        agent.invoke({"messages": [("user", f"question {n}")]}, config)  # type: ignore[attr-defined]

    summary_calls = [t for t in tags.calls if SUMMARY_TAG in t]
    assert len(summary_calls) == 1
    assert "nostream" in summary_calls[0]


def _failures(reason: str) -> float:
    value = SUMMARY_FAILURES.labels(integration="summary_flush", reason=reason)._value.get()
    return float(value)


def test_a_queue_outage_does_not_block_the_compaction() -> None:
    down = MemoryClient.from_url(f"redis://127.0.0.1:{free_port()}/0")
    agent = _agent(down, 3, [AIMessage("the summary")])

    state = _chat(agent, "u-down", 3)

    first = state["messages"][0]  # type: ignore[index]
    assert "the summary" in first.text


def test_the_previous_summary_and_the_new_messages_share_the_trim_budget(
    redis_url: str, key_prefix: str
) -> None:
    first = "S1 " + "alpha " * 20
    summarizer = QueuedChatModel(responses=[AIMessage(first), AIMessage("S2")])
    flush = MemorySummaryFlush(
        summarizer,
        enqueuer=make_enqueuer(redis_url, key_prefix),
        trigger=("messages", 5),
        keep=("messages", 1),
        trim_tokens_to_summarize=60,
    )
    replies = [AIMessage(f"reply {n} " + "y" * 80) for n in range(1, 6)]
    agent = create_agent(
        QueuedChatModel(responses=replies), middleware=[flush], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t-trim", "user_id": "u-trim"}}

    for n in range(1, 6):
        agent.invoke({"messages": [("user", f"question {n} " + "x" * 80)]}, config)

    assert len(summarizer.prompts) == 2
    assert "alpha alpha" in " ".join(m.text for m in summarizer.prompts[1])
