"""An erase reaches every sink through the sink protocols, never by its concrete class.

``NotesSink`` below is a sink the service has never heard of: it takes part in the erase
because it declares the capabilities (``erase_agent_writes``, ``tidy_after_erase``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from tests.store_support import FACTS, entry, plan, unique_ns
from tests.store_support import commit as commit_plan
from worker.connectors.base import PublishedFile
from worker.errors import SinkError
from worker.queue.redis_queue import RedisQueue
from worker.service.transfer import erase
from worker.store.memory import MemoryStore


class NotesSink:
    """A third built-in-style sink: keeps notes agents wrote, and an index per namespace."""

    name = "notes"

    def __init__(self, store: MemoryStore, *, down: bool = False) -> None:
        self.store = store
        self.down = down
        self.notes: dict[str, list[str]] = {}
        self.index: set[str] = set()
        self.deleted: list[tuple[str, str]] = []
        self.files_known_when_writes_went: list[str] = []

    def deliver(self, item: PublishedFile) -> None:
        if item.deleted:
            self.deleted.append((item.namespace, item.path))

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        self.deleted += [(namespace, p) for p in paths]

    def erase_agent_writes(self, namespaces: Sequence[str]) -> int:
        if self.down:
            raise SinkError("notes sink: connection refused")
        for key in namespaces:
            self.files_known_when_writes_went += [f.path for f in self.store.list_files(key)]
        return sum(len(self.notes.pop(key, [])) for key in namespaces)

    def tidy_after_erase(self, files: Mapping[str, Sequence[str]]) -> None:
        self.index -= set(files)


def _known(store: MemoryStore, sink: NotesSink) -> str:
    key = unique_ns()
    commit_plan(store, key, plan((entry("e1", "Likes tea"),)), expected=0, sinks=(sink.name,))
    sink.notes[key] = ["likes jazz"]
    sink.index.add(key)
    return key


def test_an_erase_clears_a_third_sinks_agent_writes_before_sql_and_tidies_it_after(
    queue: RedisQueue, sqlite_store: MemoryStore
) -> None:
    sink = NotesSink(sqlite_store)
    key = _known(sqlite_store, sink)

    done = erase(queue.admin, sqlite_store, {sink.name: sink}, [key])

    assert sink.files_known_when_writes_went == [FACTS]  # before SQL forgot the namespace
    assert key not in sink.notes
    assert key not in sink.index
    assert (key, FACTS) in sink.deleted
    assert done.files == {key: [FACTS]}


def test_a_third_sink_that_cannot_clear_agent_writes_stops_the_erase_before_sql(
    queue: RedisQueue, sqlite_store: MemoryStore
) -> None:
    sink = NotesSink(sqlite_store, down=True)
    key = _known(sqlite_store, sink)

    with pytest.raises(SinkError, match=r"nothing was erased from SQL.*notes sink"):
        erase(queue.admin, sqlite_store, {sink.name: sink}, [key])

    assert [f.path for f in sqlite_store.list_files(key)] == [FACTS]
    assert key in sink.index
