"""The hot-path client the integration tests enqueue through, and reading candidates back."""

from __future__ import annotations

from typing import Final

import redis

from worker.models import Candidate
from worker.queue.client import MemoryClient
from worker.queue.redis import open_redis
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: The hot-path deadline of the tests that do not test the deadline. Production's 0.25 s is for
#: a Redis serving a chat service; here the whole suite shares two cores with Redis, PostgreSQL,
#: RabbitMQ, LangGraph and Celery workers, and a first connect has stalled past 0.25 s under that
#: load. The tests of the deadline pass their own (0.05 to 2 s); the chaos experiments keep
#: production's and send again on a timeout, as a chat service does.
LOADED_MACHINE_SECONDS: Final = 5.0


def queue_settings(redis_url: str, key_prefix: str) -> Settings:
    """The settings both sides use: the client enqueues and the reader reads the same keys."""
    return Settings(
        redis_url=redis_url, key_prefix=key_prefix, socket_timeout_seconds=LOADED_MACHINE_SECONDS
    )


def make_enqueuer(redis_url: str, key_prefix: str) -> MemoryClient:
    """The real hot-path client for this Redis and key prefix."""
    return MemoryClient(queue_settings(redis_url, key_prefix))


def queued(redis_url: str, key_prefix: str, namespace: str) -> list[Candidate]:
    """Every candidate pending in ``namespace``, oldest first."""
    client = redis.Redis.from_url(redis_url)
    try:
        return [
            c
            for _, c in RedisQueue(
                client, queue_settings(redis_url, key_prefix).for_queue
            ).admin.pending(namespace)
        ]
    finally:
        client.close()


def deploy_policy(redis_url: str, key_prefix: str, **policy: float | int) -> None:
    """Write the deployment's queue policy into Redis, as a worker does at start (the
    client side cannot set it: ``max_pending_per_namespace``, debounce and max wait)."""
    client = open_redis(redis_url, timeout=5.0)
    try:
        settings = Settings(redis_url=redis_url, key_prefix=key_prefix, **policy)  # type: ignore[arg-type]
        RedisQueue(client, settings.for_queue).admin.publish_policy()
    finally:
        client.close()
