"""The SQL memory store, source of truth (SQLite embedded, PostgreSQL in production).

>>> from worker.store import MemoryStore
>>> store = MemoryStore.from_url("sqlite://", create=True)
>>> store.load_state("user:u1").version
0
>>> store.dispose()

The names below are imported on first use (PEP 562): importing one part of the store
(``worker.store.memory``, ``worker.store.engine``…) does not load the whole facade.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from worker.store.memory import MemoryStore
    from worker.store.records import (
        ApprovalInfo,
        CommitResult,
        EraseReport,
        FileInfo,
        FileVersionInfo,
        OutboxItem,
        RunInfo,
        RunRecord,
        SinkLag,
        TickInfo,
    )

__all__ = [
    "ApprovalInfo",
    "CommitResult",
    "EraseReport",
    "FileInfo",
    "FileVersionInfo",
    "MemoryStore",
    "OutboxItem",
    "RunInfo",
    "RunRecord",
    "SinkLag",
    "TickInfo",
]

#: Where each public name lives.
_LAZY: Final = dict.fromkeys(__all__, "worker.store.records") | {
    "MemoryStore": "worker.store.memory"
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'worker.store' has no attribute {name!r}")
