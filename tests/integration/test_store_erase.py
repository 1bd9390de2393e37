"""Erasing a user leaves no row of theirs in any table once the sinks have deleted their copies."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.store_support import FACTS, T0, at, commit, entry, plan, unique_ns
from worker.models import PendingApproval
from worker.store import MemoryStore, RunRecord
from worker.store.schema import file_versions, memory_files, metadata, namespaces, runs


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _populate(store: MemoryStore, ns: str, sink: str) -> dict[str, set[int]]:
    """Give ``ns`` a row in every table that can hold one; returns the ids of its rows."""
    approval = PendingApproval("/memories/org.md", {"op": "add"}, ("c-x",))
    commit(
        store,
        ns,
        plan((entry("e1", "Likes tea"),), approvals=(approval,)),
        expected=0,
        sinks=(sink,),
    )
    store.rollback_file(namespace=ns, path=FACTS, to_version=1, sinks=(sink,), now=at(1))
    store.put_file(
        namespace=ns, path="notes", content="n", author="operator:a", sinks=(sink,), now=at(2)
    )
    store.set_cursor("threads", "thread-of-" + ns, "msg-9", namespace=ns, now=at(3))
    store.record_run(
        RunRecord(trigger="queue", namespace=ns, started_at=at(4), outcome="failed", error="x")
    )
    with store.engine.connect() as conn:
        ns_ids = set(
            conn.execute(sa.select(namespaces.c.id).where(namespaces.c.key == ns)).scalars()
        )
        files = sa.select(memory_files.c.id).where(memory_files.c.namespace_id.in_(ns_ids))
        return {
            "namespace_id": ns_ids,
            "file_id": set(conn.execute(files).scalars()),
            "file_version_id": set(
                conn.execute(
                    sa.select(file_versions.c.id).where(file_versions.c.file_id.in_(files))
                ).scalars()
            ),
            "run_id": set(
                conn.execute(sa.select(runs.c.id).where(runs.c.namespace == ns)).scalars()
            ),
        }


def _rows_of(store: MemoryStore, ns: str, ids: dict[str, set[int]]) -> dict[str, int]:
    """Rows in any table that name ``ns``'s user or point at one of its rows."""
    user = ns.split(":")[1]
    found: dict[str, int] = {}
    with store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            own = {"namespaces": "namespace_id", "memory_files": "file_id", "runs": "run_id"}
            own["file_versions"] = "file_version_id"
            for row in conn.execute(sa.select(table)).mappings():
                text = " ".join(str(v) for v in row.values())
                points = any(row.get(col) in ids[col] for col in ids)
                is_own = table.name in own and row.get("id") in ids[own[table.name]]
                if user in text or points or is_own:
                    found[table.name] = found.get(table.name, 0) + 1
    return found


def test_erase_leaves_only_tombstones_then_nothing_after_delivery(store: MemoryStore) -> None:
    ns = unique_ns()
    sink = "sink-" + ns.split(":")[1]
    ids = _populate(store, ns, sink)
    before = _rows_of(store, ns, ids)

    report = store.erase_namespaces([ns], now=at(5))

    assert set(before) == {
        "namespaces", "memory_files", "file_versions", "entries", "candidate_ledger",
        "approvals", "outbox", "runs", "source_cursors",
    }  # fmt: skip
    assert _rows_of(store, ns, ids) == {"outbox": 2}  # one tombstone per file for the sink
    assert report.tombstones == 2
    assert report.deleted["entries"] == 1
    for item in store.due_outbox(sink=sink, now=at(5)):
        store.mark_delivered(item.id, now=at(6))
    assert _rows_of(store, ns, ids) == {}


def test_erase_queues_a_tombstone_per_file_and_sink(store: MemoryStore) -> None:
    ns = unique_ns()
    sink = "sink-" + ns.split(":")[1]
    _populate(store, ns, sink)

    store.erase_namespaces([ns], sinks=[sink + "-b"], now=at(5))

    due = [i for i in store.due_outbox(sink=None, now=at(5)) if i.namespace == ns]
    assert sorted((i.sink, i.path, i.deleted) for i in due) == [
        (sink, FACTS, True),
        (sink, "/memories/notes.md", True),
        (sink + "-b", FACTS, True),
        (sink + "-b", "/memories/notes.md", True),
    ]


def test_erase_leaves_other_namespaces_alone(store: MemoryStore) -> None:
    ns, other = unique_ns(), unique_ns()
    commit(store, ns, plan((entry("e1", "mine"),)), expected=0)
    commit(store, other, plan((entry("e1", "theirs"),)), expected=0)

    store.erase_namespaces([ns], now=T0)

    assert store.load_state(ns).entries == ()
    assert store.current_files(ns) == {}
    assert [e.text for e in store.load_state(other).entries] == ["theirs"]
    assert store.current_files(other) == {FACTS: "- theirs\n"}
