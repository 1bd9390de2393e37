"""memworker: a background memory-consolidation worker for LLM chat services.

The chat service only needs :class:`MemoryClient` (or :class:`AsyncMemoryClient`) and the
errors; they are imported lazily so ``import worker.<module>`` stays cheap.

>>> import worker
>>> issubclass(worker.QueueUnavailable, worker.MemworkerError)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.errors import (
    BacklogFull,
    ConfigurationError,
    InvalidCandidate,
    MemworkerError,
    QueueUnavailable,
    Unavailable,
    UsageError,
)
from worker.types import lazy_exports

if TYPE_CHECKING:
    from worker.queue.async_client import AsyncMemoryClient
    from worker.queue.client import MemoryClient

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

__getattr__ = lazy_exports(
    __name__,
    {
        "MemoryClient": "worker.queue.client",
        "AsyncMemoryClient": "worker.queue.async_client",
    },
)
