"""The LangGraph store sink against a real LangGraph server, and a deep agent reading it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_fixtures import free_port, langgraph_client, langgraph_url
from worker.connectors.base import PublishedFile
from worker.connectors.langgraph import (
    LangGraphStoreSink,
    content_sha256,
    item_content,
    store_namespace,
)
from worker.errors import ExternalEdit, SinkError
from worker.models import Namespace

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph

CREATED = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
MODIFIED = datetime(2025, 3, 2, 10, 30, tzinfo=UTC)


def _user() -> str:
    return "ann.lee-" + uuid.uuid4().hex[:8]  # a dot, which the SDK refuses in labels


def _file(user: str, content: str, version: int = 1) -> PublishedFile:
    return PublishedFile(
        f"user:{user}", "/memories/preferences.md", content, version, CREATED, MODIFIED
    )


def _ask_deep_agent(
    client: SyncLangGraphClient, user: str, thread_id: str | None = None
) -> tuple[str, str]:
    """Run the served deep agent once; the system prompt it saw, and the thread id."""
    if thread_id is None:
        thread_id = str(client.threads.create()["thread_id"])
    run = client.runs.create(
        thread_id,
        "deep",
        input={"messages": [{"role": "user", "content": "What do I like?"}]},
        config={"configurable": {"user_id": user}},
    )
    client.runs.join(thread_id, run["run_id"])
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    return str(messages[-1]["response_metadata"]["system_prompt"]), thread_id


def test_a_delivered_file_is_a_filedata_item_keyed_relative_to_the_route(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    user = _user()
    LangGraphStoreSink(langgraph_url).deliver(_file(user, "- likes green tea\n"))

    item = langgraph_client.store.get_item(
        store_namespace(Namespace.for_user(user)), key="/preferences.md"
    )

    assert item["value"] == {
        "content": "- likes green tea\n",
        "encoding": "utf-8",
        "created_at": "2025-03-01T09:00:00+00:00",
        "modified_at": "2025-03-02T10:30:00+00:00",
        "memworker": {"version": 1, "sha256": content_sha256("- likes green tea\n")},
    }


def test_a_newer_version_overwrites_what_memworker_published(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    user = _user()
    sink = LangGraphStoreSink(langgraph_url)
    sink.deliver(_file(user, "- tea\n", version=1))

    sink.deliver(_file(user, "- coffee\n", version=2))

    assert item_content(sink.read(f"user:{user}", "/memories/preferences.md") or {}) == (
        "- coffee\n"
    )


def test_content_the_agent_wrote_is_not_overwritten_but_raised_as_an_external_edit(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    user = _user()
    sink = LangGraphStoreSink(langgraph_url)
    sink.deliver(_file(user, "- tea\n", version=1))
    ns = store_namespace(Namespace.for_user(user))
    langgraph_client.store.put_item(ns, "/preferences.md", {"content": "- tea\n- jazz\n"})

    with pytest.raises(ExternalEdit) as raised:
        sink.deliver(_file(user, "- coffee\n", version=2))

    edit = raised.value
    assert (edit.namespace, edit.path, edit.content) == (
        f"user:{user}",
        "/memories/preferences.md",
        "- tea\n- jazz\n",
    )
    assert langgraph_client.store.get_item(ns, key="/preferences.md")["value"]["content"] == (
        "- tea\n- jazz\n"
    )


def test_overwrite_publishes_over_exactly_the_absorbed_content_and_nothing_else(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    user = _user()
    sink = LangGraphStoreSink(langgraph_url)
    ns = store_namespace(Namespace.for_user(user))
    langgraph_client.store.put_item(ns, "/preferences.md", {"content": "- jazz\n"})

    with pytest.raises(ExternalEdit):
        sink.overwrite(_file(user, "- v2\n", 2), expected_sha256=content_sha256("- other\n"))
    sink.overwrite(_file(user, "- v2\n", 2), expected_sha256=content_sha256("- jazz\n"))

    assert langgraph_client.store.get_item(ns, key="/preferences.md")["value"]["content"] == (
        "- v2\n"
    )


def test_erase_deletes_the_item(langgraph_url: str, langgraph_client: SyncLangGraphClient) -> None:
    user = _user()
    sink = LangGraphStoreSink(langgraph_url)
    sink.deliver(_file(user, "- likes green tea\n"))

    sink.erase(f"user:{user}", ["/memories/preferences.md"])

    found = langgraph_client.store.search_items(store_namespace(Namespace.for_user(user)))
    assert found["items"] == []


def test_a_deep_agent_sees_the_delivered_memory_in_its_system_prompt(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    user = _user()
    LangGraphStoreSink(langgraph_url).deliver(_file(user, "- prefers answers in French\n"))

    system_prompt, _ = _ask_deep_agent(langgraph_client, user)

    assert "/memories/preferences.md\n\n- prefers answers in French" in system_prompt


def test_a_deep_agent_thread_keeps_the_memory_it_loaded_first(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    """The documented pitfall: memory files load once per thread."""
    user = _user()
    sink = LangGraphStoreSink(langgraph_url)
    sink.deliver(_file(user, "- prefers tea\n", version=1))
    _, thread_id = _ask_deep_agent(langgraph_client, user)
    sink.deliver(_file(user, "- prefers coffee\n", version=2))

    system_prompt, _ = _ask_deep_agent(langgraph_client, user, thread_id)

    assert "prefers tea" in system_prompt
    assert "prefers coffee" not in system_prompt


def test_the_sink_raises_sink_error_while_the_server_is_down_and_delivers_once_it_is_back(
    langgraph_url: str, langgraph_client: SyncLangGraphClient
) -> None:
    user = _user()
    item = _file(user, "- likes rain\n")
    with pytest.raises(SinkError):
        LangGraphStoreSink(f"http://127.0.0.1:{free_port()}").deliver(item)

    LangGraphStoreSink(langgraph_url).deliver(item)

    value = langgraph_client.store.get_item(
        store_namespace(Namespace.for_user(user)), key="/preferences.md"
    )["value"]
    assert value["content"] == "- likes rain\n"
