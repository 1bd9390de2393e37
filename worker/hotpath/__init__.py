"""The hot path: what a chat service calls to enqueue candidate memories.

The names below are imported on first use (PEP 562), so ``from worker import MemoryClient``
loads the synchronous client only, not the asyncio one as well.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from worker.hotpath.async_client import AsyncMemoryClient
    from worker.hotpath.client import MemoryClient
    from worker.models import EnqueueFields

__all__ = ["AsyncMemoryClient", "EnqueueFields", "MemoryClient"]

#: Where each public name lives.
_LAZY: Final = {
    "AsyncMemoryClient": "worker.hotpath.async_client",
    "MemoryClient": "worker.hotpath.client",
    "EnqueueFields": "worker.models",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'worker.hotpath' has no attribute {name!r}")
