"""The hot-path client: what a chat service sees when it enqueues a candidate memory."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.memory_queue import LOADED_MACHINE_SECONDS, deploy_policy
from tests.support.private_redis import private_redis
from worker import BacklogFull, ConfigurationError, InvalidCandidate, MemoryClient, QueueUnavailable
from worker.models import EnqueueFields
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster


@pytest.fixture
def client(settings: Settings) -> Iterator[MemoryClient]:
    with MemoryClient(settings) as memory:
        yield memory


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


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

    assert [c.id for _, c in queue.admin.pending("user:u1")] == [candidate_id]


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

    ((_, c),) = queue.admin.pending("user:u1:bot")
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

    assert len(queue.admin.pending("agent:bot")) == 1


def test_org_scope_is_refused_on_the_hot_path(client: MemoryClient, queue: RedisQueue) -> None:
    with pytest.raises(InvalidCandidate, match="read-only for the hot path"):
        client.enqueue(user_id="u1", trace_id="t", text="x", scope="org")
    assert list(queue.admin.namespaces()) == []


def test_an_invalid_candidate_sends_nothing(client: MemoryClient, queue: RedisQueue) -> None:
    with pytest.raises(InvalidCandidate, match="user_id"):
        client.enqueue(user_id="../etc", trace_id="t", text="x")
    assert list(queue.admin.namespaces()) == []


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

    assert [c.id for _, c in queue.admin.pending("user:u1")] == [ids[0], ids[2]]
    assert [c.id for _, c in queue.admin.pending("user:u2")] == [ids[1]]


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
    assert list(queue.admin.namespaces()) == []


def test_enqueue_many_of_nothing_returns_nothing(client: MemoryClient) -> None:
    assert client.enqueue_many([]) == []


def test_a_full_backlog_raises_backlog_full(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    deploy_policy(redis_url, key_prefix, max_pending_per_namespace=1)
    with MemoryClient.from_url(
        redis_url, key_prefix=key_prefix, socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as client:
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

    with MemoryClient.from_url(redis_url, socket_timeout_seconds=LOADED_MACHINE_SECONDS) as client:
        assert client.settings.key_prefix == "mw"


def test_without_a_url_or_embedded_server_the_client_says_what_to_start(tmp_path: Path) -> None:
    settings = Settings(redis_url=None, data_dir=tmp_path)

    with pytest.raises(QueueUnavailable, match="start `memworker run`"):
        MemoryClient(settings)


def test_an_unknown_keyword_is_refused_naming_it_and_sends_nothing(
    client: MemoryClient, queue: RedisQueue
) -> None:
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'user'"):
        client.enqueue(user="u1", trace_id="t", text="x")  # type: ignore[call-arg]
    assert list(queue.admin.namespaces()) == []


def test_a_keyword_named_self_is_refused_as_an_unknown_field(
    client: MemoryClient, queue: RedisQueue
) -> None:
    # ``self`` is positional-only, so a caller's ``self=`` is one more unknown field, not a
    # TypeError from Python's argument binding.
    fields: dict[str, Any] = {"user_id": "u1", "trace_id": "t", "text": "x", "self": 1}
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'self'"):
        client.enqueue(**fields)
    assert list(queue.admin.namespaces()) == []


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
    assert list(queue.admin.namespaces()) == []


def test_enqueue_many_refuses_an_item_that_is_not_a_dict(client: MemoryClient) -> None:
    with pytest.raises(
        InvalidCandidate,
        match=r"enqueue_many item 0: each item is a dict of .*got tuple",
    ):
        client.enqueue_many([("u1", "t", "x")])  # type: ignore[list-item]


def test_enqueue_many_names_the_index_of_its_one_bad_item_and_sends_nothing(
    client: MemoryClient, queue: RedisQueue
) -> None:
    items: list[EnqueueFields] = [
        {"user_id": "u1", "trace_id": "t1", "text": "I prefer tea"},
        {"user_id": "u1", "trace_id": "t2", "text": "I prefer jazz"},
        {"user_id": "u1", "trace_id": "t3", "text": "   "},
        {"user_id": "u1", "trace_id": "t4", "text": "I prefer rain"},
    ]

    with pytest.raises(InvalidCandidate, match=r"^enqueue_many item 2: text is empty"):
        client.enqueue_many(items)
    assert list(queue.admin.namespaces()) == []


# --- settings: the deployment's, from the edge -------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No MEMWORKER_* variable set, and a data directory of this test."""
    for name in list(os.environ):
        if name.startswith("MEMWORKER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMWORKER_DATA_DIR", str(tmp_path / "home"))
    return monkeypatch


def test_without_arguments_the_client_reads_the_deployments_environment(
    clean_env: pytest.MonkeyPatch, settings: Settings, queue: RedisQueue
) -> None:
    clean_env.setenv("MEMWORKER_REDIS_URL", str(settings.redis_url))
    clean_env.setenv("MEMWORKER_KEY_PREFIX", settings.key_prefix)
    clean_env.setenv("MEMWORKER_QUEUE_SHARDS", str(settings.queue_shards))
    clean_env.setenv("MEMWORKER_SOCKET_TIMEOUT_SECONDS", str(LOADED_MACHINE_SECONDS))

    with MemoryClient() as client:
        cid = client.enqueue(user_id="u1", trace_id="t1", text="I prefer tea")

    assert [c.id for _, c in queue.admin.pending("user:u1")] == [cid]


def test_without_a_url_the_client_finds_the_embedded_server_of_memworker_data_dir(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    clean_env.setenv("MEMWORKER_SOCKET_TIMEOUT_SECONDS", str(LOADED_MACHINE_SECONDS))
    with private_redis(home) as server:  # what `memworker run` starts: <data dir>/redis.sock
        with MemoryClient() as client:
            cid = client.enqueue(user_id="u1", trace_id="t1", text="I prefer tea")
        with contextlib.closing(server.client()) as raw:
            stored = [fields[b"i"].decode() for _, fields in raw.xrange(_log_key(raw))]

    assert client.url == f"unix://{home / 'redis.sock'}"
    assert stored == [cid]


def test_from_url_none_honours_memworker_data_dir(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with private_redis(home), MemoryClient.from_url(None, key_prefix="chat") as client:
        assert client.url == f"unix://{home / 'redis.sock'}"
        assert client.settings.key_prefix == "chat"


def test_a_bad_client_override_names_the_field(redis_url: str) -> None:
    with pytest.raises(
        ConfigurationError, match=r"^invalid client settings: debounce_seconds: Input should be"
    ):
        MemoryClient.from_url(redis_url, debounce_seconds=0)


def test_a_bad_environment_value_names_the_field_and_its_variable(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("MEMWORKER_SOCKET_TIMEOUT_SECONDS", "-1")

    with pytest.raises(
        ConfigurationError,
        match=r"socket_timeout_seconds: .* \(argument or MEMWORKER_SOCKET_TIMEOUT_SECONDS\)",
    ):
        MemoryClient()


def test_an_unknown_client_override_names_it(redis_url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"debounce: Extra inputs are not permitted"):
        MemoryClient.from_url(redis_url, debounce=5)


def test_a_url_with_another_scheme_raises_configuration_error_naming_it() -> None:
    with pytest.raises(
        ConfigurationError, match=r"Redis URL 'http://cache:6379' has scheme 'http'"
    ):
        MemoryClient.from_url("http://cache:6379")


def test_a_malformed_url_raises_configuration_error_without_its_password() -> None:
    with pytest.raises(ConfigurationError, match="is malformed") as raised:
        MemoryClient.from_url("redis://:s3cret@cache:port/0")
    assert "s3cret" not in str(raised.value)


def test_a_url_with_a_bad_option_raises_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="cannot be used"):
        MemoryClient.from_url("redis://cache:6379/0?socket_timeout=soon")


def _log_key(client: redis.Redis) -> bytes:
    (key,) = client.scan_iter(match="*:log")
    return bytes(key)


def test_enqueue_stores_when_it_was_said_on_the_candidate(
    client: MemoryClient, queue: RedisQueue
) -> None:
    said = datetime(2025, 3, 1, 9, 30, tzinfo=timezone(timedelta(hours=1)))

    client.enqueue(user_id="u1", trace_id="t", text="I moved to Lyon", occurred_at=said)

    ((_, c),) = queue.admin.pending("user:u1")
    assert (c.occurred_at, c.said_at) == (said, said)
    assert c.created_at > said


def test_an_event_time_in_the_future_is_refused_and_sends_nothing(
    client: MemoryClient, queue: RedisQueue
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)

    with pytest.raises(InvalidCandidate, match="cannot lie in the future"):
        client.enqueue(user_id="u1", trace_id="t", text="x", occurred_at=later)
    assert list(queue.admin.namespaces()) == []
