"""The hot-path client: what a chat service sees when it enqueues a candidate memory."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.memory_queue import deploy_policy
from worker import BacklogFull, ConfigurationError, InvalidCandidate, MemoryClient, QueueUnavailable
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings


@pytest.fixture
def client(settings: Settings) -> Iterator[MemoryClient]:
    with MemoryClient(settings) as memory:
        yield memory


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings)


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers: a hung Redis."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


def test_enqueue_returns_the_id_of_the_queued_candidate(
    client: MemoryClient, queue: RedisQueue
) -> None:
    candidate_id = client.enqueue(user_id="u1", trace_id="req-1", text="I prefer tea")

    assert [c.id for _, c in queue.pending("user:u1")] == [candidate_id]


def test_enqueue_stores_every_argument_on_the_candidate(
    client: MemoryClient, queue: RedisQueue
) -> None:
    client.enqueue(
        user_id="u1",
        trace_id="req-1",
        text="  Reply in French  ",
        kind="fact",
        topic="preferences",
        key="preference.language",
        assistant_id="bot",
        thread_id="th-9",
        source="tool",
    )

    ((_, c),) = queue.pending("user:u1:bot")
    assert (c.user_id, c.trace_id, c.thread_id, c.text, c.path, c.key, c.source) == (
        "u1",
        "req-1",
        "th-9",
        "Reply in French",
        "/memories/preferences.md",
        "preference.language",
        "tool",
    )


def test_an_idempotency_key_gives_a_retried_capture_the_same_id(client: MemoryClient) -> None:
    first = client.enqueue(user_id="u1", trace_id="t", text="x", idempotency_key="turn-7")
    second = client.enqueue(user_id="u1", trace_id="t", text="x", idempotency_key="turn-7")

    assert first == second


def test_agent_scope_queues_in_the_assistants_namespace(
    client: MemoryClient, queue: RedisQueue
) -> None:
    client.enqueue(
        user_id="u1", trace_id="t", text="Office closes at 6", scope="agent", assistant_id="bot"
    )

    assert len(queue.pending("agent:bot")) == 1


def test_org_scope_is_refused_on_the_hot_path(client: MemoryClient, queue: RedisQueue) -> None:
    with pytest.raises(InvalidCandidate, match="read-only for the hot path"):
        client.enqueue(user_id="u1", trace_id="t", text="x", scope="org")
    assert list(queue.namespaces()) == []


def test_an_invalid_candidate_sends_nothing(client: MemoryClient, queue: RedisQueue) -> None:
    with pytest.raises(InvalidCandidate, match="user_id"):
        client.enqueue(user_id="../etc", trace_id="t", text="x")
    assert list(queue.namespaces()) == []


def test_the_text_limit_comes_from_the_settings(settings: Settings) -> None:
    with (
        MemoryClient(settings.model_copy(update={"max_text_bytes": 16})) as client,
        pytest.raises(InvalidCandidate, match="17 bytes; the limit is 16"),
    ):
        client.enqueue(user_id="u1", trace_id="t", text="x" * 17)


def test_enqueue_many_returns_ids_in_order(client: MemoryClient, queue: RedisQueue) -> None:
    ids = client.enqueue_many(
        [
            {"user_id": "u1", "trace_id": "t", "text": "one"},
            {"user_id": "u2", "trace_id": "t", "text": "two"},
            {"user_id": "u1", "trace_id": "t", "text": "three"},
        ]
    )

    assert [c.id for _, c in queue.pending("user:u1")] == [ids[0], ids[2]]
    assert [c.id for _, c in queue.pending("user:u2")] == [ids[1]]


def test_enqueue_many_with_one_invalid_item_sends_nothing(
    client: MemoryClient, queue: RedisQueue
) -> None:
    with pytest.raises(InvalidCandidate, match="text is empty"):
        client.enqueue_many(
            [
                {"user_id": "u1", "trace_id": "t", "text": "fine"},
                {"user_id": "u1", "trace_id": "t", "text": "   "},
            ]
        )
    assert list(queue.namespaces()) == []


def test_enqueue_many_of_nothing_returns_nothing(client: MemoryClient) -> None:
    assert client.enqueue_many([]) == []


def test_a_full_backlog_raises_backlog_full(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    deploy_policy(redis_url, key_prefix, max_pending_per_namespace=1)
    with MemoryClient.from_url(redis_url, key_prefix=key_prefix) as client:
        client.enqueue(user_id="u1", trace_id="t", text="one")

        with pytest.raises(BacklogFull, match="MEMWORKER_MAX_PENDING_PER_NAMESPACE"):
            client.enqueue(user_id="u1", trace_id="t", text="two")


def test_redis_down_raises_queue_unavailable_saying_nothing_was_enqueued(closed_port: int) -> None:
    with (
        MemoryClient.from_url(f"redis://127.0.0.1:{closed_port}/0") as client,
        pytest.raises(
            QueueUnavailable,
            match=rf"127.0.0.1:{closed_port}/0 is unreachable .*nothing was enqueued",
        ),
    ):
        client.enqueue(user_id="u1", trace_id="t", text="x")


def test_the_unavailable_message_never_shows_the_password(closed_port: int) -> None:
    with (
        MemoryClient.from_url(f"redis://:hunter2@127.0.0.1:{closed_port}/0") as client,
        pytest.raises(QueueUnavailable) as caught,
    ):
        client.enqueue(user_id="u1", trace_id="t", text="x")
    assert "hunter2" not in str(caught.value)
    assert ":***@" in str(caught.value)


def test_enqueue_many_with_redis_down_raises_queue_unavailable(closed_port: int) -> None:
    with (
        MemoryClient.from_url(f"redis://127.0.0.1:{closed_port}/0") as client,
        pytest.raises(QueueUnavailable),
    ):
        client.enqueue_many([{"user_id": "u1", "trace_id": "t", "text": "x"}])


def test_a_hung_redis_raises_queue_unavailable_after_the_socket_timeout(silent_server: int) -> None:
    url = f"redis://127.0.0.1:{silent_server}/0"
    with (
        MemoryClient.from_url(url, socket_timeout_seconds=0.05) as client,
        pytest.raises(QueueUnavailable, match=r"did not answer within 0\.05 s"),
    ):
        client.enqueue(user_id="u1", trace_id="t", text="x")


def test_from_url_reads_no_environment(monkeypatch: pytest.MonkeyPatch, redis_url: str) -> None:
    monkeypatch.setenv("MEMWORKER_KEY_PREFIX", "from-env")

    with MemoryClient.from_url(redis_url) as client:
        assert client.settings.key_prefix == "mw"


def test_from_url_with_a_bad_setting_raises_configuration_error(redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid client settings"):
        MemoryClient.from_url(redis_url, debounce_seconds=-1)


def test_without_a_url_or_embedded_server_the_client_says_what_to_start(tmp_path: Path) -> None:
    settings = Settings(redis_url=None, data_dir=tmp_path)

    with pytest.raises(QueueUnavailable, match="start `memworker run`"):
        MemoryClient(settings)


def test_an_unknown_keyword_is_refused_naming_it_and_sends_nothing(
    client: MemoryClient, queue: RedisQueue
) -> None:
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'user'"):
        client.enqueue(user="u1", trace_id="t", text="x")  # type: ignore[call-arg]
    assert list(queue.namespaces()) == []


def test_a_missing_required_keyword_is_refused_naming_it(client: MemoryClient) -> None:
    with pytest.raises(InvalidCandidate, match=r"missing enqueue field\(s\) 'text'"):
        client.enqueue(user_id="u1", trace_id="t")  # type: ignore[call-arg]


def test_positional_arguments_are_refused(client: MemoryClient) -> None:
    with pytest.raises(TypeError):
        client.enqueue("u1", "t", "x")  # type: ignore[call-arg]


def test_enqueue_many_refuses_an_item_with_an_unknown_field(
    client: MemoryClient, queue: RedisQueue
) -> None:
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'now'"):
        client.enqueue_many(
            [{"user_id": "u1", "trace_id": "t", "text": "x", "now": 0}]  # type: ignore[typeddict-unknown-key]
        )
    assert list(queue.namespaces()) == []


def test_enqueue_many_refuses_an_item_that_is_not_a_dict(client: MemoryClient) -> None:
    with pytest.raises(
        InvalidCandidate, match=r"each enqueue_many item is a dict of enqueue fields .*got tuple"
    ):
        client.enqueue_many([("u1", "t", "x")])  # type: ignore[list-item]
