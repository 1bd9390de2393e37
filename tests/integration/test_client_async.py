"""The asyncio hot-path client behaves like the sync one."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from tests.support.memory_queue import LOADED_MACHINE_SECONDS, deploy_policy
from worker import AsyncMemoryClient, BacklogFull, InvalidCandidate, QueueUnavailable
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(settings) as memory:
        yield memory


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


async def test_async_enqueue_returns_the_id_of_the_queued_candidate(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    candidate_id = await client.enqueue(user_id="u1", trace_id="req-1", text="I prefer tea")

    assert [c.id for _, c in queue.admin.pending("user:u1")] == [candidate_id]


async def test_async_enqueue_many_returns_ids_in_order(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    ids = await client.enqueue_many(
        [
            {"user_id": "u1", "trace_id": "t", "text": "one"},
            {"user_id": "u1", "trace_id": "t", "text": "two"},
        ]
    )

    assert [c.id for _, c in queue.admin.pending("user:u1")] == ids


async def test_async_org_scope_is_refused(client: AsyncMemoryClient, queue: RedisQueue) -> None:
    with pytest.raises(InvalidCandidate, match="read-only for the hot path"):
        await client.enqueue(user_id="u1", trace_id="t", text="x", scope="org")
    assert list(queue.admin.namespaces()) == []


async def test_async_full_backlog_raises_backlog_full(
    redis_url: str, key_prefix: str, redis_client: redis.Redis
) -> None:
    deploy_policy(redis_url, key_prefix, max_pending_per_namespace=1)
    async with AsyncMemoryClient.from_url(
        redis_url, key_prefix=key_prefix, socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as client:
        await client.enqueue(user_id="u1", trace_id="t", text="one")

        with pytest.raises(BacklogFull):
            await client.enqueue(user_id="u1", trace_id="t", text="two")


async def test_async_redis_down_raises_queue_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async with AsyncMemoryClient.from_url(f"redis://127.0.0.1:{port}/0") as client:
        with pytest.raises(QueueUnavailable, match="nothing was enqueued"):
            await client.enqueue(user_id="u1", trace_id="t", text="x")


async def test_async_hung_redis_raises_queue_unavailable_after_the_socket_timeout() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        url = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"
        async with AsyncMemoryClient.from_url(url, socket_timeout_seconds=0.05) as client:
            with pytest.raises(QueueUnavailable, match="did not answer"):
                await client.enqueue(user_id="u1", trace_id="t", text="x")


async def test_async_enqueue_refuses_an_unknown_keyword_naming_it(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'topics'"):
        await client.enqueue(user_id="u1", trace_id="t", text="x", topics="a")  # type: ignore[call-arg]
    assert list(queue.admin.namespaces()) == []


async def test_async_enqueue_refuses_a_keyword_named_self_naming_it(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    fields: dict[str, Any] = {"user_id": "u1", "trace_id": "t", "text": "x", "self": 1}
    with pytest.raises(InvalidCandidate, match=r"unknown enqueue field\(s\) 'self'"):
        await client.enqueue(**fields)
    assert list(queue.admin.namespaces()) == []


async def test_async_enqueue_stores_every_argument_on_the_candidate(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    await client.enqueue(
        user_id="u1",
        trace_id="req-1",
        text="Reply in French",
        kind="turn",
        topic="preferences",
        key="preference.language",
        assistant_id="bot",
        thread_id="th-9",
        idempotency_key="turn-1",
        source="middleware",
    )

    ((_, c),) = queue.admin.pending("user:u1:bot")
    assert (c.kind.value, c.path, c.key, c.thread_id, c.source) == (
        "turn",
        "/memories/preferences.md",
        "preference.language",
        "th-9",
        "middleware",
    )


async def test_async_client_without_arguments_reads_the_deployments_environment(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, queue: RedisQueue
) -> None:
    for name in list(os.environ):
        if name.startswith("MEMWORKER_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMWORKER_REDIS_URL", str(settings.redis_url))
    monkeypatch.setenv("MEMWORKER_KEY_PREFIX", settings.key_prefix)
    monkeypatch.setenv("MEMWORKER_QUEUE_SHARDS", str(settings.queue_shards))
    monkeypatch.setenv("MEMWORKER_SOCKET_TIMEOUT_SECONDS", str(LOADED_MACHINE_SECONDS))

    async with AsyncMemoryClient() as client:
        cid = await client.enqueue(user_id="u1", trace_id="t1", text="I prefer tea")

    assert [c.id for _, c in queue.admin.pending("user:u1")] == [cid]


async def test_async_enqueue_many_names_the_index_of_its_bad_item(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    with pytest.raises(InvalidCandidate, match=r"^enqueue_many item 1: trace_id is empty"):
        await client.enqueue_many(
            [
                {"user_id": "u1", "trace_id": "t1", "text": "I prefer tea"},
                {"user_id": "u1", "trace_id": "", "text": "I prefer jazz"},
            ]
        )
    assert list(queue.admin.namespaces()) == []


async def test_async_enqueue_stores_when_it_was_said_on_the_candidate(
    client: AsyncMemoryClient, queue: RedisQueue
) -> None:
    said = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)

    await client.enqueue(user_id="u1", trace_id="t", text="I moved to Lyon", occurred_at=said)

    ((_, c),) = queue.admin.pending("user:u1")
    assert c.occurred_at == said
