"""The thread-scan source against threads of a real LangGraph server."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_fixtures import converse, langgraph_client, langgraph_url
from tests.support.cursors import InMemoryCursorStore
from tests.support.memory_queue import queued
from worker.connectors.langgraph import scan_threads
from worker.types import MAX_TEXT_BYTES

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph


def _converse(client: SyncLangGraphClient, key_prefix: str, user_id: str, text: str) -> str:
    """One finished run on a new thread; returns the thread id."""
    return converse(client, key_prefix, user_id, text)[0]


def _updated_at(client: SyncLangGraphClient, thread_id: str) -> datetime:
    value = client.threads.get(thread_id)["updated_at"]
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


@pytest.fixture
def three_threads(langgraph_client: SyncLangGraphClient, key_prefix: str) -> list[str]:
    """Three threads of one user, finished one after the other."""
    user = "u-scan-" + uuid.uuid4().hex[:8]
    return [
        _converse(langgraph_client, key_prefix, user, f"hello {n}") for n in ("one", "two", "three")
    ]


def test_scan_finds_exactly_the_threads_updated_in_the_window(
    langgraph_client: SyncLangGraphClient, three_threads: list[str]
) -> None:
    first, second, _third = three_threads
    start, end = _updated_at(langgraph_client, first), _updated_at(langgraph_client, second)

    found = scan_threads(langgraph_client, start, end, cursors=InMemoryCursorStore())

    assert [(c.thread_id, c.text, c.source) for c in found] == [
        (second, "user: hello two\nassistant: echo: hello two", "thread_scan")
    ]


def test_a_second_scan_of_the_same_window_adds_nothing(
    langgraph_client: SyncLangGraphClient, three_threads: list[str]
) -> None:
    first, _second, third = three_threads
    start, end = _updated_at(langgraph_client, first), _updated_at(langgraph_client, third)
    cursors = InMemoryCursorStore()
    scan_threads(langgraph_client, start, end, cursors=cursors)

    assert scan_threads(langgraph_client, start, end, cursors=cursors) == []


def test_a_scanned_turn_has_the_id_the_capture_middleware_gave_it(
    langgraph_client: SyncLangGraphClient, redis_url: str, key_prefix: str
) -> None:
    user = "u-same-" + uuid.uuid4().hex[:8]
    before = datetime.fromisoformat("2000-01-01T00:00:00+00:00")
    thread_id = _converse(langgraph_client, key_prefix, user, "hello again")
    end = _updated_at(langgraph_client, thread_id)

    scanned = [
        c
        for c in scan_threads(langgraph_client, before, end, cursors=InMemoryCursorStore())
        if c.thread_id == thread_id
    ]

    assert [c.id for c in scanned] == [c.id for c in queued(redis_url, key_prefix, f"user:{user}")]


def test_a_scanned_turn_is_said_when_its_thread_state_was_written(
    langgraph_client: SyncLangGraphClient, key_prefix: str
) -> None:
    user = "u-said-" + uuid.uuid4().hex[:8]
    thread_id = _converse(langgraph_client, key_prefix, user, "I moved to Lyon")
    end = _updated_at(langgraph_client, thread_id)
    state = langgraph_client.threads.get_state(thread_id)
    written = datetime.fromisoformat(str(state["created_at"]))
    later = end + timedelta(days=2)
    start = end - timedelta(minutes=1)

    found = scan_threads(langgraph_client, start, end, cursors=InMemoryCursorStore(), now=later)

    (turn,) = [c for c in found if c.thread_id == thread_id]

    assert (turn.occurred_at, turn.said_at, turn.created_at) == (written, written, later)


def test_a_thread_message_of_80000_lines_becomes_one_turn_cut_to_the_text_bound(
    langgraph_client: SyncLangGraphClient, key_prefix: str
) -> None:
    user = "u-scan-" + uuid.uuid4().hex[:8]
    dump = "".join(f"- fact number {i}\n" for i in range(80_000))
    thread = _converse(langgraph_client, key_prefix, user, dump)
    at = _updated_at(langgraph_client, thread)

    found = scan_threads(
        langgraph_client, at - timedelta(seconds=1), at, cursors=InMemoryCursorStore()
    )

    (turn,) = [c for c in found if c.thread_id == thread]
    assert len(turn.text.encode()) <= MAX_TEXT_BYTES
    assert turn.text.startswith("user: - fact number 0\n- fact number 1\n")
