"""The shard count is part of the queue's layout: a worker never strands what an old one left.

A namespace lives in shard ``crc32(namespace) % shards``; with another count its candidates sit
in keys no sweep visits. So a worker start with a new count is refused while the old layout
holds anything, and accepted (and recorded) once it is drained.
"""

from __future__ import annotations

import pytest

from worker.errors import QueueMisconfigured
from worker.models import make_candidate
from worker.queue.client import MemoryClient
from worker.queue.redis import RedisClient
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0 = 1_700_000_000.0


def queue_with(redis_client: RedisClient, settings: Settings, shards: int) -> RedisQueue:
    return RedisQueue(redis_client, settings.model_copy(update={"queue_shards": shards}).for_queue)


def test_a_new_shard_count_is_refused_while_the_old_layout_holds_candidates(
    redis_client: RedisClient, settings: Settings
) -> None:
    old = queue_with(redis_client, settings, 4)
    old.admin.publish_policy()
    old.enqueue(make_candidate(user_id="u1", trace_id="t", text="I prefer tea"), now=T0)

    with pytest.raises(
        QueueMisconfigured, match=r"laid out in 4 shards and still holds 1 namespace"
    ) as refused:
        queue_with(redis_client, settings, 8).admin.publish_policy()
    assert "MEMWORKER_QUEUE_SHARDS=4" in str(refused.value)  # says how to drain first


def test_a_new_shard_count_is_accepted_once_the_queue_is_drained(
    redis_client: RedisClient, settings: Settings
) -> None:
    old = queue_with(redis_client, settings, 4)
    old.admin.publish_policy()
    old.enqueue(make_candidate(user_id="u1", trace_id="t", text="I prefer tea"), now=T0)
    (claim,) = old.claim_due(now=T0 + settings.max_wait_seconds)
    old.ack(claim, now=T0 + settings.max_wait_seconds)

    new = queue_with(redis_client, settings, 8)
    new.admin.publish_policy()
    new.enqueue(make_candidate(user_id="u1", trace_id="t", text="I drink coffee"), now=T0 + 400)

    assert [c.namespace for c in new.claim_due(now=T0 + 800)] == ["user:u1"]
    with pytest.raises(QueueMisconfigured, match="laid out in 8 shards"):
        old.admin.publish_policy()  # and now the old count is the one refused


def test_a_dead_lettered_namespace_counts_as_held(
    redis_client: RedisClient, settings: Settings
) -> None:
    old = queue_with(redis_client, settings, 4)
    old.admin.publish_policy()
    old.enqueue(make_candidate(user_id="u1", trace_id="t", text="I prefer tea"), now=T0)
    now = T0 + settings.max_wait_seconds
    for attempt in range(settings.max_attempts):
        (claim,) = old.claim_due(now=now + attempt * 10_000)
        old.fail(claim, "boom", now=now + attempt * 10_000)
    assert [d.namespace for d in old.admin.dead_letters()] == ["user:u1"]

    with pytest.raises(QueueMisconfigured, match="laid out in 4 shards"):
        queue_with(redis_client, settings, 16).admin.publish_policy()


def test_a_chat_host_with_another_shard_count_is_refused_and_enqueues_nothing(
    redis_client: RedisClient, settings: Settings
) -> None:
    workers = queue_with(redis_client, settings, 4)
    workers.admin.publish_policy()
    host = settings.model_copy(update={"queue_shards": 8})

    with (
        MemoryClient(host) as client,
        pytest.raises(QueueMisconfigured, match="Set MEMWORKER_QUEUE_SHARDS=4 for this client"),
    ):
        client.enqueue(user_id="u1", trace_id="t", text="I prefer tea")

    assert workers.admin.pending("user:u1") == []
    assert queue_with(redis_client, settings, 8).admin.pending("user:u1") == []


def test_a_chat_host_with_the_workers_shard_count_enqueues(
    redis_client: RedisClient, settings: Settings
) -> None:
    workers = queue_with(redis_client, settings, 4)
    workers.admin.publish_policy()

    with MemoryClient(settings.model_copy(update={"queue_shards": 4})) as client:
        cid = client.enqueue(user_id="u1", trace_id="t", text="I prefer tea")

    assert [c.id for _, c in workers.admin.pending("user:u1")] == [cid]


def test_a_queue_an_older_release_laid_out_is_recognised_by_its_policy_keys(
    redis_client: RedisClient, settings: Settings
) -> None:
    old = queue_with(redis_client, settings, 16)  # the older release's default
    old.admin.publish_policy()
    redis_client.delete(f"{settings.key_prefix}:shards")  # older releases recorded no count
    old.enqueue(make_candidate(user_id="u1", trace_id="t", text="I prefer tea"), now=T0)

    with pytest.raises(QueueMisconfigured, match="laid out in 16 shards"):
        queue_with(redis_client, settings, 256).admin.publish_policy()
