"""An operator command that touched more namespaces than one SQL filter can list (``reconcile
--all`` over a large queue) still publishes a bounded number of rows and says exactly how many
deliveries are left."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

import pytest

from tests.store_support import at, commit, entry, plan, unique_ns
from worker.connectors.base import PublishedFile
from worker.service.publish import publish_now
from worker.store import MemoryStore

#: More names than PostgreSQL (65,535) accepts as bind parameters of one statement.
TOUCHED: Final = 70_000


class Sink:
    timeout_seconds = 1.0

    def __init__(self, name: str) -> None:
        self.name = name
        self.delivered: list[str] = []

    def deliver(self, item: PublishedFile) -> None:
        self.delivered.append(item.namespace)

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        pass


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def test_publish_now_over_more_namespaces_than_one_query_lists_reports_what_is_left(
    store: MemoryStore,
) -> None:
    sink_name = "sink-" + unique_ns().split(":")[1]
    written = [unique_ns() for _ in range(4)]
    for ns in written:
        commit(store, ns, plan((entry("e1", "Likes tea"),)), expected=0, sinks=(sink_name,))
    touched = [f"user:none{i}" for i in range(TOUCHED)] + written  # the written ones last
    sink = Sink(sink_name)

    report = publish_now(store, {sink_name: sink}, now=at(0), namespaces=touched, limit=3)

    assert (report.delivered, report.remaining, len(sink.delivered)) == (3, 1, 3)
