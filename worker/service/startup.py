"""What a worker does before it takes work: check Redis's durability, publish the policy,
count the queue's statistics where no release counted them yet.

``memworker worker`` and ``memworker run`` call :func:`prepare_queue` before Celery starts,
so a worker never runs on a Redis that evicts candidates (unless the operator said so), and
the enqueue script finds this deployment's debounce, max wait and backlog limit in Redis.
"""

from __future__ import annotations

from worker.queue.deployment import Durability
from worker.queue.redis_queue import RedisQueue
from worker.queue.stats import rebuild_stats


def prepare_queue(queue: RedisQueue) -> Durability:
    """Refuse an evicting Redis (:class:`~worker.errors.QueueMisconfigured`, unless
    ``allow_evicting_redis``), log the other durability risks, then write the policy and
    recount the statistics of shards an earlier release wrote (once: a no-op afterwards)."""
    durability = queue.check_durability()
    queue.publish_policy()
    rebuild_stats(queue.redis, queue.layout)
    return durability
