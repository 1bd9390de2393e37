"""Every way Redis can refuse the queue is a named MemworkerError that says what to do, and a
Redis that would lose candidates is refused (or loudly reported) when a worker starts.

Each test runs a private redis-server configured for the failure (never the shared one).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import redis
from typer.testing import CliRunner

from tests.support.private_redis import PrivateRedis, private_redis
from worker.cli.app import app
from worker.errors import (
    MemworkerError,
    QueueMisconfigured,
    QueueOutOfMemory,
    QueueReadOnly,
    QueueUnavailable,
)
from worker.queue.client import MemoryClient
from worker.queue.redis_queue import RedisQueue
from worker.service.sweep import prepare_queue
from worker.settings import Settings

PREFIX: Final = "rf"


@pytest.fixture
def rdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rf")  # short: a Unix socket path must fit in 108 bytes


def _settings(server: PrivateRedis, **extra: object) -> Settings:
    return Settings(redis_url=server.url, key_prefix=PREFIX, **extra)  # type: ignore[arg-type]


def _queue(server: PrivateRedis, **extra: object) -> RedisQueue:
    return RedisQueue(server.client(), _settings(server, **extra).for_queue)


def _enqueue(url: str) -> str:
    with MemoryClient.from_url(url, key_prefix=PREFIX, socket_timeout_seconds=2) as client:
        return client.enqueue(user_id="u1", trace_id="t", text="I prefer tea")


def _fill(client: redis.Redis) -> None:
    """Write until Redis refuses with OOM (its maxmemory reached under noeviction)."""
    for i in range(10_000):
        try:
            client.set(f"filler:{i}", b"x" * 65_536)
        except redis.exceptions.OutOfMemoryError:
            return
    raise AssertionError("Redis never reached its maxmemory")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def evicting(rdir: Path) -> Iterator[PrivateRedis]:
    with private_redis(rdir, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru") as s:
        yield s


def test_an_evicting_redis_is_refused_at_worker_start(evicting: PrivateRedis) -> None:
    queue = _queue(evicting)

    with pytest.raises(QueueMisconfigured, match=r"allkeys-lru.*MEMWORKER_ALLOW_EVICTING_REDIS"):
        prepare_queue(queue.admin)
    assert evicting.client().keys(f"{PREFIX}:*") == []  # refused before writing anything


def test_memworker_worker_refuses_an_evicting_redis_with_exit_2(
    evicting: PrivateRedis, tmp_path: Path
) -> None:
    env = {
        "MEMWORKER_REDIS_URL": evicting.url,
        "MEMWORKER_KEY_PREFIX": PREFIX,
        "MEMWORKER_DATA_DIR": str(tmp_path / "data"),
    }

    ran = CliRunner().invoke(app, ["worker"], env=env)

    assert ran.exit_code == 2
    assert "maxmemory-policy noeviction" in " ".join(ran.stderr.split())


def test_the_explicit_override_starts_on_an_evicting_redis_with_a_warning(
    evicting: PrivateRedis,
) -> None:
    durability = prepare_queue(_queue(evicting, allow_evicting_redis=True).admin)

    assert durability.maxmemory_policy == "allkeys-lru"
    assert any("deletes queued candidates" in w for w in durability.warnings)


def test_a_redis_without_aof_starts_with_a_loud_warning(
    rdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        private_redis(rdir, "--appendonly", "no") as server,
        caplog.at_level(logging.WARNING, logger="worker.queue.deployment"),
    ):
        durability = prepare_queue(_queue(server).admin)

    assert durability.appendonly == "no"
    assert any("without AOF" in r.getMessage() for r in caplog.records)


def test_a_redis_with_aof_and_noeviction_starts_without_warnings(rdir: Path) -> None:
    args = ("--appendonly", "yes", "--maxmemory-policy", "noeviction")
    with private_redis(rdir, *args) as server:
        durability = prepare_queue(_queue(server).admin)

    assert (durability.appendonly, durability.maxmemory_policy) == ("yes", "noeviction")
    assert durability.warnings == []


def test_a_managed_redis_that_refuses_config_is_tolerated(rdir: Path) -> None:
    with private_redis(rdir, "--rename-command", "CONFIG", "") as server:
        durability = prepare_queue(_queue(server).admin)

    assert durability.maxmemory_policy is None
    assert any("refused CONFIG GET" in w for w in durability.warnings)


def test_a_full_redis_raises_queue_out_of_memory_and_writes_nothing(rdir: Path) -> None:
    with private_redis(rdir, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction") as server:
        filler = server.client()
        _fill(filler)

        with pytest.raises(QueueOutOfMemory, match=r"maxmemory limit.*nothing was written"):
            _enqueue(server.url)
        assert filler.keys(f"{PREFIX}:*") == []


def test_the_worker_side_enqueue_of_a_full_redis_raises_queue_out_of_memory(rdir: Path) -> None:
    from worker.models import make_candidate

    with private_redis(rdir, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction") as server:
        filler = server.client()
        _fill(filler)

        with pytest.raises(QueueOutOfMemory):
            _queue(server).enqueue(make_candidate(user_id="u1", trace_id="t", text="tea"))


def test_a_read_only_replica_raises_queue_read_only(rdir: Path) -> None:
    args = ("--replicaof", "127.0.0.1", str(_closed_port()), "--replica-read-only", "yes")
    with (
        private_redis(rdir, *args) as replica,
        pytest.raises(QueueReadOnly, match=r"read-only replica.*primary"),
    ):
        _enqueue(replica.url)


def test_a_wrong_password_raises_queue_misconfigured_without_showing_it(rdir: Path) -> None:
    with private_redis(rdir, "--requirepass", "right-one") as server:
        url = f"unix://:wrong-one@{server.sock}"
        with pytest.raises(QueueMisconfigured, match="refused our credentials") as raised:
            _enqueue(url)

    assert "wrong-one" not in str(raised.value)


def test_a_cluster_node_without_the_cluster_client_raises_queue_misconfigured(
    rdir: Path,
) -> None:
    args = ("--cluster-enabled", "yes", "--cluster-config-file", str(rdir / "nodes.conf"))
    with private_redis(rdir, *args) as node, pytest.raises(QueueMisconfigured, match="Cluster"):
        _enqueue(node.url)


def test_no_redis_failure_of_the_hot_path_escapes_the_error_tree(rdir: Path) -> None:
    with private_redis(rdir, "--requirepass", "p") as server, pytest.raises(MemworkerError):
        _enqueue(server.url)  # NOAUTH


def test_a_redis_that_cannot_load_the_scripts_raises_queue_unavailable(rdir: Path) -> None:
    with (
        private_redis(rdir, "--rename-command", "SCRIPT", "") as server,
        pytest.raises(QueueUnavailable, match="refused a queue call"),
    ):
        _enqueue(server.url)  # NOSCRIPT, and SCRIPT LOAD is not allowed either
