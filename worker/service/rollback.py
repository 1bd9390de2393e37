"""Bring an old version of a memory file back, as a new version (history is append-only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from worker.service.publish import DeliveryReport, publish_now
from worker.sinks.base import Sink
from worker.store.files import unified_diff
from worker.store.memory import MemoryStore
from worker.store.records import ROLLBACK_AUTHOR


@dataclass(frozen=True)
class RollbackPreview:
    current_version: int
    diff: str  #: from the current content to the version brought back ("" when equal)


@dataclass(frozen=True)
class RolledBack:
    version: int  #: the new version, equal in content to the one brought back
    delivery: DeliveryReport


def preview_rollback(store: MemoryStore, namespace: str, path: str, to: int) -> RollbackPreview:
    """What rolling ``path`` back to version ``to`` would change; NotFound for a bad version."""
    target = store.file_version(namespace, path, to)
    current = store.file_history(namespace, path)[-1]
    return RollbackPreview(current.version, unified_diff(path, current.content, target.content))


def rollback(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    namespace: str,
    path: str,
    *,
    to: int,
    now: datetime,
    author: str = ROLLBACK_AUTHOR,
) -> RolledBack:
    """Add a version of ``path`` equal to version ``to``, then publish it."""
    result = store.rollback_file(
        namespace=namespace, path=path, to_version=to, author=author, sinks=tuple(sinks), now=now
    )
    ((_, version),) = result.files
    return RolledBack(version, publish_now(store, sinks, now=now, namespaces=[namespace]))
