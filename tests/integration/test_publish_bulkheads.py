"""Publishing is a bulkhead per namespace: a namespace the sink refuses is set aside with the
sink's reason, and never holds up, nor opens the breaker for, anyone else's files.

A real files-like sink that refuses one namespace (as a sink answers a too-large or malformed
item with an error), on SQLite and PostgreSQL, beside healthy namespaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Final

import pytest

from tests.store_support import at, unique_ns
from worker.connectors.base import PublishedFile
from worker.errors import SinkError
from worker.service.publish import MAX_RETRY_SECONDS, deliver_due
from worker.store.memory import MemoryStore

#: Healthy namespaces beside the refused one.
OTHERS: Final = 5
#: Passes a refused namespace fails, each after its backoff ran out.
PASSES: Final = 8


class RefusingSink:
    """Takes every item but those of ``refused``, which it answers with an error."""

    timeout_seconds = 1.0

    def __init__(self, name: str, refused: str) -> None:
        self.name, self.refused = name, refused
        self.delivered: list[str] = []
        self.refusals = 0

    def deliver(self, item: PublishedFile) -> None:
        if item.namespace == self.refused:
            self.refusals += 1
            raise SinkError(f"{self.name}: HTTP 400, the item is too large")
        self.delivered.append(item.namespace)

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        return None


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _files(store: MemoryStore, sink: str, namespace: str, count: int = 1) -> None:
    for i in range(count):
        store.put_file(
            namespace=namespace, path=f"/memories/f{i}.md", content=f"- fact {i}\n",
            author="test", sinks=[sink], now=at(0),
        )  # fmt: skip


def test_a_namespace_the_sink_refuses_is_set_aside_and_every_other_is_delivered(
    store: MemoryStore,
) -> None:
    bad = unique_ns()
    sink = RefusingSink("sink-" + bad.split(":")[1], bad)
    _files(store, sink.name, bad, count=3)
    others = [unique_ns() for _ in range(OTHERS)]
    for namespace in others:
        _files(store, sink.name, namespace)

    report = deliver_due(store, {sink.name: sink}, now=at(1))

    assert sorted(sink.delivered) == sorted(others)
    assert [(a.namespace, a.item) for a in report.set_aside] == [(bad, "/memories/f0.md")]
    assert "HTTP 400" in report.set_aside[0].reason
    assert sink.refusals == 1  # its other files were given back, not tried against a refusal
    assert report.skipped_sinks == ()


def test_a_namespace_refused_pass_after_pass_never_opens_the_breaker_for_the_others(
    store: MemoryStore,
) -> None:
    bad = unique_ns()
    sink = RefusingSink("sink-" + bad.split(":")[1], bad)
    _files(store, sink.name, bad)
    step = timedelta(seconds=MAX_RETRY_SECONDS + 1)
    for n in range(PASSES):  # alone in the outbox, and refused every time
        deliver_due(store, {sink.name: sink}, now=at(1) + n * step)
    late = unique_ns()
    _files(store, sink.name, late)

    report = deliver_due(store, {sink.name: sink}, now=at(1) + PASSES * step)

    assert sink.refusals == PASSES + 1
    assert late in sink.delivered
    assert report.skipped_sinks == ()
    (health,) = store.sink_health(sink.name)
    assert health.state(at(1) + PASSES * step) == "closed"
