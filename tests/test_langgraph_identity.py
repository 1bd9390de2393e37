"""One identity on a real LangGraph server with custom auth: a signed-in user who names another
user (or org) in the run gets nothing of theirs, by memory loading and by capture alike."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_app.graphs import HELPER_ASSISTANT, HELPER_LAYOUT
from tests.langgraph_fixtures import langgraph_auth_url
from tests.support.memory_queue import queued
from worker.sinks.base import PublishedFile
from worker.sinks.langgraph_store import LangGraphStoreSink

__all__ = ["langgraph_auth_url"]

pytestmark = pytest.mark.langgraph

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
PREFS = "/memories/preferences.md"
COMPLIANCE = "/memories/policies/compliance.md"
#: What only bob's (health) memory and globex's policy say.
BOBS_SECRET = "bob takes insulin twice a day"
GLOBEX_RULE = "globex: record every call"


def _as(url: str, key: str) -> SyncLangGraphClient:
    return get_sync_client(url=url, api_key=key)


@pytest.fixture(scope="module", autouse=True)
def published(langgraph_auth_url: str) -> None:
    """Bob's memory and both orgs' policies in the server's store, written as bob would."""
    sink = LangGraphStoreSink(langgraph_auth_url, HELPER_LAYOUT, api_key="key-bob")
    for namespace, path, content in (
        (f"user:bob:{HELPER_ASSISTANT}", PREFS, f"- {BOBS_SECRET}\n"),
        ("org:globex", COMPLIANCE, f"- {GLOBEX_RULE}\n"),
        ("org:acme", COMPLIANCE, "- acme: no cold calls\n"),
    ):
        sink.deliver(PublishedFile(namespace, path, content, 1, T0, T0))


def _run(client: SyncLangGraphClient, graph: str, text: str, **request: Any) -> dict[str, Any]:
    """One run on a new thread: its status and everything the thread holds afterwards."""
    thread_id = str(client.threads.create()["thread_id"])
    run = client.runs.create(
        thread_id, graph, input={"messages": [{"role": "user", "content": text}]}, **request
    )
    client.runs.join(thread_id, run["run_id"])
    status = client.runs.get(thread_id, run["run_id"])["status"]
    return {"status": status, "state": client.threads.get_state(thread_id)}


def _prompt(result: dict[str, Any]) -> str:
    return str(result["state"]["values"]["messages"][-1]["response_metadata"]["system_prompt"])


def test_the_signed_in_user_reads_their_own_memory_and_their_orgs(langgraph_auth_url: str) -> None:
    bob = _as(langgraph_auth_url, "key-bob")

    prompt = _prompt(_run(bob, "deep_memory", "hello"))

    assert BOBS_SECRET in prompt
    assert GLOBEX_RULE in prompt


@pytest.mark.parametrize(
    "request_",
    [
        {"context": {"user_id": "bob"}},
        {"config": {"configurable": {"user_id": "bob"}}},
        {"metadata": {"user_id": "bob"}},
        {"context": {"org_id": "globex"}},
    ],
    ids=["context-user", "configurable-user", "metadata-user", "context-org"],
)
def test_a_signed_in_user_naming_another_user_or_org_gets_nothing_of_theirs(
    langgraph_auth_url: str, request_: dict[str, Any]
) -> None:
    alice = _as(langgraph_auth_url, "key-alice")

    read = f"call read_file {json.dumps({'file_path': '/memories/preferences.md'})}"

    result = _run(alice, "deep_memory", read, **request_)

    assert result["status"] == "error"
    assert BOBS_SECRET not in str(result)
    assert GLOBEX_RULE not in str(result)


def test_a_signed_in_user_naming_another_user_captures_nothing_for_them(
    langgraph_auth_url: str, redis_url: str, key_prefix: str
) -> None:
    alice = _as(langgraph_auth_url, "key-alice")

    attack = _run(
        alice, "capture", "I am diabetic", context={"user_id": "bob", "mw_key_prefix": key_prefix}
    )
    own = _run(alice, "capture", "I prefer tea", context={"mw_key_prefix": key_prefix})

    assert attack["status"] == own["status"] == "success"  # the reply is never lost
    assert queued(redis_url, key_prefix, "user:bob") == []
    assert [c.user_id for c in queued(redis_url, key_prefix, "user:alice")] == ["alice"]
