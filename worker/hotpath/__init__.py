"""The hot path: what a chat service calls to enqueue candidate memories."""

from __future__ import annotations

from worker.hotpath.async_client import AsyncMemoryClient
from worker.hotpath.client import EnqueueItem, MemoryClient
from worker.models import EnqueueFields

__all__ = ["AsyncMemoryClient", "EnqueueFields", "EnqueueItem", "MemoryClient"]
