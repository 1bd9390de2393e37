"""Write an operator-owned memory file (org policies, agent notes) and publish it.

The file becomes operator-owned: the consolidator never edits it (changes it proposes wait for
an approval), and the hot path cannot write org scope at all. It is versioned and published
like any other file, on the database's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from worker.service.publish import DeliveryReport, publish_now
from worker.sinks.base import Sink
from worker.store.memory import MemoryStore


@dataclass(frozen=True)
class Put:
    """The file written (its version) and what its publication delivered."""

    namespace: str
    path: str
    version: int
    delivery: DeliveryReport


def put_file(
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    *,
    namespace: str,
    path: str,
    content: str,
    author: str,
) -> Put:
    """Commit ``content`` as the next version of ``namespace`` ``path``, then publish it."""
    result = store.put_file(
        namespace=namespace,
        path=path,
        content=content,
        author=author,
        sinks=tuple(sinks),
        now=store.db_now(),
    )
    delivery = publish_now(store, sinks, namespaces=[namespace])
    ((_, version),) = result.files
    return Put(namespace, path, version, delivery)
