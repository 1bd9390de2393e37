"""The queue on a real three-master Redis Cluster: every call lands on its slot's node.

What broke before: raw ``MOVED`` errors from the hot-path client, pipelined scripts refused,
namespaces stranded "due" while the sweep logged the error and carried on, a Celery broker on
the cluster dying at start. The suite's queue, hot-path, worker and CLI modules marked
``cluster`` run on this cluster too; these tests cover what only a cluster has.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from worker.errors import ConfigurationError, QueueMisconfigured, QueueUnavailable
from worker.queue.async_client import AsyncMemoryClient
from worker.queue.client import MemoryClient
from worker.queue.redis import ClusterAddress, check_redis_url, open_redis, redacted
from worker.queue.redis_queue import RedisQueue
from worker.queue.scripts import QueueLayout
from worker.runtime.celery import create_app
from worker.settings import Settings

USERS = 60


@pytest.fixture
def cluster_settings(cluster_redis_url: str, settings: Settings) -> Settings:
    """The test's settings on the cluster, with the default shard count (spread widely)."""
    return settings.model_copy(update={"redis_url": cluster_redis_url, "queue_shards": 256})


@pytest.fixture
def cluster(cluster_settings: Settings) -> Iterator[RedisCluster]:
    client = open_redis(str(cluster_settings.redis_url), timeout=5.0)
    assert isinstance(client, RedisCluster)
    yield client
    pipe = client.pipeline(transaction=False)
    for key in client.scan_iter(match=f"{cluster_settings.key_prefix}:*", count=1000):
        pipe.delete(key)
    pipe.execute()
    client.close()


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def keys_per_master(client: RedisCluster, prefix: str) -> list[int]:
    return [
        len(list(node.redis_connection.scan_iter(match=f"{prefix}:*", count=1000)))
        for node in client.get_primaries()
    ]


def test_the_hot_path_client_enqueues_to_every_master_without_a_redirect_error(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    with MemoryClient(cluster_settings) as client:
        ids = [
            client.enqueue(user_id=f"u{i}", trace_id="t", text="I prefer tea") for i in range(30)
        ]

    queue = RedisQueue(cluster, cluster_settings.for_queue)
    assert [queue.admin.pending(f"user:u{i}")[0][1].id for i in range(30)] == ids
    assert all(n > 0 for n in keys_per_master(cluster, cluster_settings.key_prefix))


def test_enqueue_many_spans_the_masters_and_keeps_each_users_order(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    items = [{"user_id": f"u{i % 20}", "trace_id": "t", "text": f"fact {i}"} for i in range(60)]
    with MemoryClient(cluster_settings) as client:
        ids = client.enqueue_many(items)  # type: ignore[arg-type]

    queue = RedisQueue(cluster, cluster_settings.for_queue)
    for user in range(20):
        expected = [ids[i] for i in range(60) if i % 20 == user]
        assert [c.id for _, c in queue.admin.pending(f"user:u{user}")] == expected


async def test_the_async_client_enqueues_each_users_candidates_in_order(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    items = [{"user_id": f"u{i % 5}", "trace_id": "t", "text": f"fact {i}"} for i in range(25)]
    async with AsyncMemoryClient(cluster_settings) as client:
        ids = await client.enqueue_many(items)  # type: ignore[arg-type]

    queue = RedisQueue(cluster, cluster_settings.for_queue)
    for user in range(5):
        assert [c.id for _, c in queue.admin.pending(f"user:u{user}")] == ids[user::5]


def test_one_sweep_claims_every_due_namespace_on_every_master(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    with MemoryClient(cluster_settings) as client:
        client.enqueue_many(
            [{"user_id": f"u{i}", "trace_id": "t", "text": "I prefer tea"} for i in range(USERS)]
        )
    queue = RedisQueue(cluster, cluster_settings.for_queue)
    later = time.time() + cluster_settings.max_wait_seconds + 1

    claims = queue.claim_due(now=later)
    for claim in claims:
        assert queue.ack(claim, now=later)

    assert sorted(c.namespace for c in claims) == sorted(f"user:u{i}" for i in range(USERS))
    assert queue.claim_due(now=later + cluster_settings.max_wait_seconds) == []
    assert sum(s.pending for s in queue.admin.stats(now=later).scopes.values()) == 0


def _move_slot(client: RedisCluster, slot: int) -> None:
    """Migrate ``slot`` and its keys to another primary, as a resharding does."""
    source = client.nodes_manager.get_node_from_slot(slot)
    target = next(n for n in client.get_primaries() if n.name != source.name)  # type: ignore[no-untyped-call]
    src, dst = source.redis_connection, target.redis_connection
    src_id, dst_id = src.execute_command("CLUSTER MYID"), dst.execute_command("CLUSTER MYID")
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    keys = src.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000)
    if keys:
        src.execute_command("MIGRATE", target.host, target.port, "", 0, 5000, "KEYS", *keys)
    for node in client.get_primaries():  # type: ignore[no-untyped-call]
        node.redis_connection.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)


def test_calls_to_a_slot_that_moved_are_followed_to_its_new_master(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    queue = RedisQueue(cluster, cluster_settings.for_queue)
    layout = QueueLayout(cluster_settings.key_prefix, cluster_settings.queue_shards)
    with MemoryClient(cluster_settings) as client:
        client.enqueue(user_id="u1", trace_id="t", text="before the move")
        _move_slot(cluster, cluster.keyslot(layout.log("user:u1")))
        client.enqueue(user_id="u1", trace_id="t", text="after the move")  # a stale slot map

    later = time.time() + cluster_settings.max_wait_seconds + 1
    claims = [c for c in queue.claim_due(now=later) if c.namespace == "user:u1"]
    assert [c.text for _, c in queue.read_batch(claims[0])] == [
        "before the move",
        "after the move",
    ]


async def test_the_async_client_follows_a_slot_that_moved_to_its_new_master(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    queue = RedisQueue(cluster, cluster_settings.for_queue)
    layout = QueueLayout(cluster_settings.key_prefix, cluster_settings.queue_shards)
    async with AsyncMemoryClient(cluster_settings) as client:
        await client.enqueue(user_id="u2", trace_id="t", text="before the move")
        _move_slot(cluster, cluster.keyslot(layout.log("user:u2")))
        await client.enqueue_many(
            [{"user_id": "u2", "trace_id": "t", "text": f"after the move {i}"} for i in range(3)]
        )

    later = time.time() + cluster_settings.max_wait_seconds + 1
    (claim,) = [c for c in queue.claim_due(now=later) if c.namespace == "user:u2"]
    assert [c.text for _, c in queue.read_batch(claim)] == [
        "before the move",
        *(f"after the move {i}" for i in range(3)),
    ]


def test_a_cluster_no_node_of_which_answers_raises_queue_unavailable(closed_port: int) -> None:
    url = f"redis+cluster://:pw@127.0.0.1:{closed_port}"
    with (
        MemoryClient.from_url(url) as client,  # connecting waits for the first enqueue
        pytest.raises(QueueUnavailable, match=r"no node of the Redis Cluster .*:\*\*\*@"),
    ):
        client.enqueue(user_id="u1", trace_id="t", text="x")


def test_a_clustered_queue_refuses_to_be_the_celery_broker(cluster_settings: Settings) -> None:
    with pytest.raises(ConfigurationError, match="set MEMWORKER_BROKER_URL"):
        create_app(cluster_settings.model_copy(update={"broker_url": None}))


def test_an_evicting_policy_on_one_master_refuses_the_worker_start(
    cluster: RedisCluster, cluster_settings: Settings
) -> None:
    node = cluster.get_primaries()[1].redis_connection  # type: ignore[no-untyped-call]
    node.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with pytest.raises(QueueMisconfigured, match="allkeys-lru"):
            RedisQueue(cluster, cluster_settings.for_queue).admin.check_durability()
    finally:
        node.config_set("maxmemory-policy", "noeviction")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+cluster://10.0.0.1:6379/2", "only has database 0|has only database 0"),
        ("redis+cluster://10.0.0.1:63x9", "malformed node"),
        ("redis+cluster://", "malformed node"),
    ],
)
def test_a_bad_cluster_url_is_refused_naming_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        check_redis_url(url)


def test_a_cluster_url_without_ports_uses_6379_and_keeps_its_credentials() -> None:
    address = ClusterAddress.parse("rediss+cluster://app:p%40ss@a,b:7000")

    assert address == ClusterAddress((("a", 6379), ("b", 7000)), "app", "p@ss", tls=True)
    assert redacted("rediss+cluster://app:p%40ss@a,b:7000") == "rediss+cluster://app:***@a,b:7000"


def test_the_queue_client_of_a_cluster_url_is_a_cluster_client(cluster_redis_url: str) -> None:
    client = open_redis(cluster_redis_url, timeout=1.0)
    try:
        assert isinstance(client, RedisCluster)
        assert len(client.get_primaries()) == 3  # type: ignore[no-untyped-call]
    finally:
        client.close()


def test_a_single_node_url_still_gives_a_plain_client(single_redis_url: str) -> None:
    client = open_redis(single_redis_url, timeout=1.0)
    try:
        assert isinstance(client, redis.Redis)
    finally:
        client.close()
