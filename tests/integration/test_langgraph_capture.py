"""The capture middleware inside an agent served by a real LangGraph server."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_fixtures import converse, langgraph_client, langgraph_url
from tests.support.memory_queue import queued

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph


def test_a_served_agent_run_enqueues_one_turn_without_tool_traffic(
    langgraph_client: SyncLangGraphClient, redis_url: str, key_prefix: str
) -> None:
    thread_id, run_id = converse(
        langgraph_client, key_prefix, "u-cap", "What is the weather in Paris?"
    )

    [candidate] = queued(redis_url, key_prefix, "user:u-cap")

    assert (candidate.kind.value, candidate.user_id, candidate.trace_id, candidate.thread_id) == (
        "turn",
        "u-cap",
        run_id,
        thread_id,
    )
    assert candidate.text == (
        "user: What is the weather in Paris?\nassistant: The forecast: sunny in Paris"
    )
