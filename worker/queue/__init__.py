"""The durable debounced queue in Redis: per-namespace logs, due times, leases, dead letters."""

from __future__ import annotations

from worker.queue.keys import QueueLayout
from worker.queue.redis_queue import RedisQueue
from worker.queue.types import Claim, DeadLetter, QueueStats, ScopeStats

__all__ = ["Claim", "DeadLetter", "QueueLayout", "QueueStats", "RedisQueue", "ScopeStats"]
