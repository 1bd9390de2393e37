"""The durable debounced queue in Redis: per-namespace logs, due times, leases, dead letters.

The names below are imported on first use (PEP 562): the hot path reads
:mod:`worker.queue.address` and the scripts without loading the worker's queue.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from worker.queue.admin import QueueAdmin
    from worker.queue.keys import QueueLayout
    from worker.queue.redis_queue import RedisQueue
    from worker.queue.types import Claim, DeadLetter, QueueStats, ScopeStats

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
_LAZY: Final = {
    "QueueAdmin": "worker.queue.admin",
    "QueueLayout": "worker.queue.keys",
    "RedisQueue": "worker.queue.redis_queue",
    "Claim": "worker.queue.types",
    "DeadLetter": "worker.queue.types",
    "QueueStats": "worker.queue.types",
    "ScopeStats": "worker.queue.types",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'worker.queue' has no attribute {name!r}")
