"""memworker: a background memory-consolidation worker for LLM chat services.

The chat service only needs :class:`MemoryClient` (or :class:`AsyncMemoryClient`) and the
errors; they are imported lazily so ``import worker.<module>`` stays cheap.

>>> import worker
>>> issubclass(worker.QueueUnavailable, worker.MemworkerError)
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from worker.errors import (
    BacklogFull,
    ConfigurationError,
    InvalidCandidate,
    MemworkerError,
    QueueUnavailable,
    Unavailable,
    UsageError,
)

if TYPE_CHECKING:
    from worker.hotpath.async_client import AsyncMemoryClient
    from worker.hotpath.client import MemoryClient

__version__ = "0.1.0"

__all__ = [
    "AsyncMemoryClient",
    "BacklogFull",
    "ConfigurationError",
    "InvalidCandidate",
    "MemoryClient",
    "MemworkerError",
    "QueueUnavailable",
    "Unavailable",
    "UsageError",
]

_LAZY = {
    "MemoryClient": "worker.hotpath.client",
    "AsyncMemoryClient": "worker.hotpath.async_client",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'worker' has no attribute {name!r}")
