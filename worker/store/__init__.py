"""The SQL memory store, source of truth (SQLite embedded, PostgreSQL in production).

>>> from worker.store import MemoryStore
>>> store = MemoryStore.from_url("sqlite://", create=True)
>>> store.load_state("user:u1").version
0
>>> store.dispose()
"""

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
