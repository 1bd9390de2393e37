"""The hot path: what a chat service calls to enqueue candidate memories.

The names below are imported on first use (PEP 562), so ``from worker import MemoryClient``
loads the synchronous client only, not the asyncio one as well.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.lazy import lazy_exports

if TYPE_CHECKING:
    from worker.hotpath.async_client import AsyncMemoryClient
    from worker.hotpath.client import MemoryClient
    from worker.models import EnqueueFields

__all__ = ["AsyncMemoryClient", "EnqueueFields", "MemoryClient"]

#: Where each public name lives.
__getattr__ = lazy_exports(
    __name__,
    {
        "AsyncMemoryClient": "worker.hotpath.async_client",
        "MemoryClient": "worker.hotpath.client",
        "EnqueueFields": "worker.models",
    },
)
