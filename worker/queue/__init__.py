"""The durable debounced queue in Redis: per-namespace logs, due times, leases, dead letters.

The names below are imported on first use (PEP 562): the hot path reads
:mod:`worker.queue.redis` and the scripts without loading the worker's queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.types import lazy_exports

if TYPE_CHECKING:
    from worker.queue.admin import QueueAdmin
    from worker.queue.redis_queue import Claim, RedisQueue
    from worker.queue.scripts import QueueLayout
    from worker.queue.types import DeadLetter, QueueStats, ScopeStats

__all__ = [
    "Claim",
    "DeadLetter",
    "QueueAdmin",
    "QueueLayout",
    "QueueStats",
    "RedisQueue",
    "ScopeStats",
]

#: Where each public name lives.
__getattr__ = lazy_exports(
    __name__,
    {
        "QueueAdmin": "worker.queue.admin",
        "QueueLayout": "worker.queue.scripts",
        "RedisQueue": "worker.queue.redis_queue",
        "Claim": "worker.queue.redis_queue",
        "DeadLetter": "worker.queue.types",
        "QueueStats": "worker.queue.types",
        "ScopeStats": "worker.queue.types",
    },
)
