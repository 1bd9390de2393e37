"""The hot path refuses an evicting Redis (``allkeys-*``) as the workers do: every enqueue,
sync and async, single node and cluster, raises QueueMisconfigured and writes nothing; the
check rides on each new connection, never on a steady-state enqueue."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.cluster import RedisCluster

from tests.support.memory_queue import LOADED_MACHINE_SECONDS
from tests.support.private_redis import PrivateRedis, private_redis
from worker.errors import QueueMisconfigured
from worker.models import EnqueueFields
from worker.queue.async_client import AsyncMemoryClient
from worker.queue.client import MemoryClient
from worker.queue.redis import open_redis

EVICTING = ("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")


def _fact(n: int = 0) -> EnqueueFields:
    return {"user_id": "u1", "trace_id": f"t{n}", "text": f"I prefer tea, take {n}"}


@pytest.fixture
def evicting(tmp_path: Path) -> Iterator[PrivateRedis]:
    with private_redis(tmp_path, *EVICTING) as server:
        yield server


def _keys(server: PrivateRedis) -> int:
    with server.client() as client:
        return int(client.dbsize())


def test_every_enqueue_to_an_allkeys_lru_redis_is_refused_and_writes_nothing(
    evicting: PrivateRedis,
) -> None:
    with MemoryClient.from_url(
        evicting.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as client:
        for n in range(3):
            with pytest.raises(QueueMisconfigured, match=r"allkeys-lru.*nothing was enqueued"):
                client.enqueue(**_fact(n))
        with pytest.raises(QueueMisconfigured):
            client.enqueue_many([_fact(n) for n in range(10)])

    assert _keys(evicting) == 0


async def test_the_async_client_refuses_an_allkeys_lru_redis_too(evicting: PrivateRedis) -> None:
    async with AsyncMemoryClient.from_url(
        evicting.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as client:
        for n in range(3):
            with pytest.raises(QueueMisconfigured, match="allkeys-lru"):
                await client.enqueue(**_fact(n))
        with pytest.raises(QueueMisconfigured):
            await client.enqueue_many([_fact(n) for n in range(10)])

    assert _keys(evicting) == 0


def test_with_config_disabled_the_policy_is_read_from_info(tmp_path: Path) -> None:
    # Managed Redis often renames CONFIG away; INFO memory still names the policy.
    with (
        private_redis(tmp_path, *EVICTING, "--rename-command", "CONFIG", "") as server,
        MemoryClient.from_url(
            server.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
        ) as client,
        pytest.raises(QueueMisconfigured, match="allkeys-lru"),
    ):
        client.enqueue(**_fact())


def test_a_redis_that_hides_its_policy_entirely_is_accepted_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The documented decision: the workers' start-up check (their own credentials) decides.
    hidden = ("--rename-command", "CONFIG", "", "--rename-command", "INFO", "")
    with (
        caplog.at_level(logging.WARNING, logger="worker.queue.pool"),
        private_redis(tmp_path, *EVICTING, *hidden) as server,
        MemoryClient.from_url(
            server.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
        ) as client,
    ):
        client.enqueue(**_fact())
        client.enqueue(**_fact(1))

    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "cannot check" in caplog.records[0].message


def test_once_the_policy_is_fixed_the_next_enqueue_goes_through(evicting: PrivateRedis) -> None:
    with MemoryClient.from_url(
        evicting.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as client:
        with pytest.raises(QueueMisconfigured):
            client.enqueue(**_fact())
        with evicting.client() as admin:
            admin.config_set("maxmemory-policy", "noeviction")

        client.enqueue(**_fact(1))

    assert _keys(evicting) > 0


def test_a_reconnect_to_a_redis_restarted_with_eviction_is_refused(tmp_path: Path) -> None:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        with MemoryClient.from_url(
            server.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
        ) as client:
            client.enqueue(**_fact())
            server.stop()
            server.args = EVICTING
            server.start()  # same socket: the pooled connection is now stale

            with pytest.raises(QueueMisconfigured, match="allkeys-lru"):
                client.enqueue(**_fact(1))
    finally:
        server.stop()


def test_the_informed_override_lets_the_client_enqueue(evicting: PrivateRedis) -> None:
    with MemoryClient.from_url(
        evicting.url,
        key_prefix="mw",
        allow_evicting_redis=True,
        socket_timeout_seconds=LOADED_MACHINE_SECONDS,
    ) as c:
        c.enqueue(**_fact())

    assert _keys(evicting) > 0


def test_the_policy_is_read_once_per_connection_not_per_enqueue(tmp_path: Path) -> None:
    with (
        private_redis(tmp_path) as server,
        MemoryClient.from_url(
            server.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
        ) as client,
    ):
        for n in range(50):
            client.enqueue(**_fact(n))
        with server.client() as admin:
            stats = admin.info("commandstats")

    config = stats.get("cmdstat_config|get") or stats["cmdstat_config"]  # by Redis version
    assert config["calls"] == 1
    assert stats["cmdstat_evalsha"]["calls"] >= 50  # (one more: the first met NOSCRIPT)


@pytest.mark.cluster
async def test_a_cluster_whose_primaries_evict_is_refused_by_both_clients(
    cluster_redis_url: str,
) -> None:
    admin = open_redis(cluster_redis_url, timeout=5.0)
    assert isinstance(admin, RedisCluster)
    admin.config_set("maxmemory-policy", "allkeys-lru", target_nodes=RedisCluster.PRIMARIES)
    try:
        with (
            MemoryClient.from_url(
                cluster_redis_url,
                key_prefix="mw-evict",
                socket_timeout_seconds=LOADED_MACHINE_SECONDS,
            ) as client,
            pytest.raises(QueueMisconfigured, match="allkeys-lru"),
        ):
            client.enqueue(**_fact())
        async with AsyncMemoryClient.from_url(
            cluster_redis_url, key_prefix="mw-evict", socket_timeout_seconds=LOADED_MACHINE_SECONDS
        ) as aio:
            with pytest.raises(QueueMisconfigured, match="allkeys-lru"):
                await aio.enqueue(**_fact())
        assert not admin.keys("mw-evict*", target_nodes=RedisCluster.PRIMARIES)
    finally:
        admin.config_set("maxmemory-policy", "noeviction", target_nodes=RedisCluster.PRIMARIES)
        admin.close()


def test_a_refused_connection_is_not_kept(evicting: PrivateRedis) -> None:
    with MemoryClient.from_url(
        evicting.url, key_prefix="mw", socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as client:
        for n in range(3):
            with pytest.raises(QueueMisconfigured):
                client.enqueue(**_fact(n))
        with evicting.client() as admin:
            clients = [c for c in admin.client_list() if c.get("name") != "admin"]

    assert len(clients) == 1  # only the admin's own: every refused socket was closed
