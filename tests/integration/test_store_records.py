"""Cursors, approvals, runs, and export/import of one namespace."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.store_support import FACTS, T0, at, commit, entry, plan, unique_ns
from worker.errors import NotFound, StoreError
from worker.models import PendingApproval
from worker.store import MemoryStore, RunRecord


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def test_cursor_is_none_until_set_then_overwritten(store: MemoryStore) -> None:
    key = unique_ns()
    assert store.get_cursor("threads", key) is None

    store.set_cursor("threads", key, "m1", now=T0)
    store.set_cursor("threads", key, "m2", now=at(1))

    assert store.get_cursor("threads", key) == "m2"


def test_deciding_an_approval_records_who_and_when(store: MemoryStore) -> None:
    ns = unique_ns()
    approval = PendingApproval("/memories/org.md", {"op": "add"}, ("c1",))
    commit(store, ns, plan(candidates=("c1",), approvals=(approval,)), expected=0)
    [pending] = store.pending_approvals(namespace=ns)

    decided = store.decide_approval(pending.id, True, "operator:ana", at(1))

    assert (decided.status, decided.decided_by, decided.decided_at) == (
        "approved",
        "operator:ana",
        at(1),
    )
    assert store.pending_approvals(namespace=ns) == []


def test_deciding_twice_is_refused(store: MemoryStore) -> None:
    ns = unique_ns()
    approval = PendingApproval("/memories/org.md", {"op": "add"}, ("c1",))
    commit(store, ns, plan(candidates=("c1",), approvals=(approval,)), expected=0)
    [pending] = store.pending_approvals(namespace=ns)
    store.decide_approval(pending.id, False, "operator:ana", at(1))

    with pytest.raises(NotFound, match="not pending: it was rejected"):
        store.decide_approval(pending.id, True, "operator:bob", at(2))


def test_record_run_stores_a_failed_run(store: MemoryStore) -> None:
    ns = unique_ns()

    run_id = store.record_run(
        RunRecord(trigger="queue", namespace=ns, started_at=T0, outcome="failed", error="boom")
    )

    [stored] = store.runs(namespace=ns)
    assert (stored.id, stored.outcome, stored.error, stored.started_at) == (
        run_id,
        "failed",
        "boom",
        T0,
    )


def test_record_run_refuses_an_unknown_outcome(store: MemoryStore) -> None:
    with pytest.raises(StoreError, match="outcome 'meh' is not one of"):
        store.record_run(RunRecord(trigger="queue", namespace=None, started_at=T0, outcome="meh"))


def test_export_then_import_into_a_new_namespace_reproduces_it(store: MemoryStore) -> None:
    source, target = unique_ns(), unique_ns()
    commit(store, source, plan((entry("e1", "Likes tea"),)), expected=0)
    store.put_file(namespace=source, path="notes", content="n\n", author="operator:a", now=at(1))
    document = json.loads(json.dumps(store.export_namespace(source)))

    result = store.import_namespace(document, namespace=target, sinks=("files",), now=at(2))

    assert store.current_files(target) == store.current_files(source)
    assert store.load_state(target).entries == store.load_state(source).entries
    assert store.already_recorded(target, ["c-e1"]) == {"c-e1"}
    assert [v.version for v in store.file_history(target, FACTS)] == [1]
    assert (result.version, len(result.outbox_ids)) == (2, 2)


def test_import_into_a_namespace_with_memory_is_refused(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "x"),)), expected=0)

    with pytest.raises(StoreError, match="already has memory"):
        store.import_namespace(store.export_namespace(ns), now=at(1))


def test_invalid_import_document_writes_nothing(store: MemoryStore) -> None:
    source, target = unique_ns(), unique_ns()
    commit(store, source, plan((entry("e1", "x"),)), expected=0)
    document = store.export_namespace(source)
    document["files"][0]["path"] = "/etc/passwd"

    with pytest.raises(StoreError, match="outside /memories/"):
        store.import_namespace(document, namespace=target, now=at(1))

    assert store.load_state(target).version == 0
