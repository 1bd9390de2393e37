"""The hot path: what a chat service calls to enqueue candidate memories."""

from __future__ import annotations

from worker.hotpath.async_client import AsyncMemoryClient
from worker.hotpath.client import EnqueueItem, MemoryClient

__all__ = ["AsyncMemoryClient", "EnqueueItem", "MemoryClient"]
