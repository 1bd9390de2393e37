"""Erase a user everywhere: the queue, the SQL store and the sinks.

Order matters: the queue first (so no batch of the user is merged back afterwards), then SQL
in one transaction (which queues an erase tombstone per file and sink), then the tombstones are
delivered (the sinks delete their copies; a delivered tombstone is itself deleted). A namespace
a worker is consolidating right now is not erased: its commit could land after the erase, so
the caller is told to try again once the lease ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from worker.errors import MemworkerError
from worker.models import Namespace, Scope
from worker.queue.redis_queue import RedisQueue
from worker.service.publish import DeliveryReport, publish_now
from worker.sinks.base import Sink
from worker.sinks.files import FilesSink
from worker.store.memory import MemoryStore


@dataclass(frozen=True)
class EraseTarget:
    """The namespaces an erase would cover, and what stands in its way."""

    keys: list[str]  #: the user's namespaces the store or the queue knows, per the request
    busy: list[str]  #: of those, the ones a worker holds a lease on right now
    others: list[str]  #: the user's namespaces the request leaves alone (other assistants)


@dataclass(frozen=True)
class Erased:
    files: dict[str, list[str]]  #: per namespace, the paths of the files erased
    queued: dict[str, int]  #: per namespace, the queued candidates dropped
    sql_rows: dict[str, int]  #: per table, the rows deleted (tables with none left out)
    delivery: DeliveryReport  #: the sinks' deletions


def erase_target(
    queue: RedisQueue,
    store: MemoryStore,
    user: str,
    *,
    assistant: str | None = None,
    every_assistant: bool = False,
) -> EraseTarget:
    """The user's namespaces to erase: one (with or without an assistant), or all of them."""
    every = _all_of_user(queue, store, user)
    if every_assistant:
        keys = every
    else:
        key = Namespace.for_user(user, assistant_id=assistant).key
        known = key in every or queue.namespace_state(key).known
        keys = [key] if known else []
    busy = [k for k in keys if queue.namespace_state(k).leased]
    return EraseTarget(keys, busy, [k for k in every if k not in keys])


def erase(
    queue: RedisQueue,
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    keys: list[str],
    *,
    now: datetime,
) -> Erased:
    """Erase ``keys`` from the queue, then SQL, then the sinks (see the module docstring)."""
    files = {k: [f.path for f in store.list_files(k)] for k in keys}
    queued = {k: queue.purge_namespace(k) for k in keys}
    report = store.erase_namespaces(keys, now=now, sinks=tuple(sinks))
    delivery = publish_now(store, sinks, now=now)
    _prune_empty_dirs(sinks, files)
    rows = {table: n for table, n in sorted(report.deleted.items()) if n}
    return Erased(files, queued, rows, delivery)


def _all_of_user(queue: RedisQueue, store: MemoryStore, user: str) -> list[str]:
    found = set(store.namespaces(scope="user", user_id=user))
    for key in queue.namespaces():
        with contextlib.suppress(MemworkerError):
            ns = Namespace.parse(key)
            if ns.scope is Scope.USER and ns.user_id == user:
                found.add(key)
    return sorted(found)


def _prune_empty_dirs(sinks: Mapping[str, Sink], files: dict[str, list[str]]) -> None:
    """Remove the folders a files sink kept for the erased files, when they are now empty.

    Folder names carry the user id, so an empty folder is still a trace of the user.
    """
    for sink in sinks.values():
        if not isinstance(sink, FilesSink):
            continue
        root = sink.root.resolve()
        for key, paths in files.items():
            for path in paths:
                folder = sink.path_for(key, path).resolve().parent
                while folder != root and root in folder.parents:
                    with contextlib.suppress(OSError):  # not empty, or already gone
                        folder.rmdir()
                    if folder.exists():
                        break
                    folder = folder.parent
