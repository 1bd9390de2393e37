"""commit_batch: everything in one transaction, fenced by the namespace version."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.store_support import FACTS, T0, at, commit, entry, plan, render, run, unique_ns
from worker.errors import InvalidPlan, StaleVersion, StoreError
from worker.models import AppliedPlan, FileChange, LedgerRow, PendingApproval
from worker.store import MemoryStore
from worker.store.schema import (
    candidate_ledger,
    entries,
    file_versions,
    memory_files,
    namespaces,
    outbox,
    runs,
)


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def _counts(store: MemoryStore, namespace: str) -> dict[str, int]:
    """Rows of ``namespace`` in every table a commit writes."""
    with store.engine.connect() as conn:
        ns_id = conn.execute(
            sa.select(namespaces.c.id).where(namespaces.c.key == namespace)
        ).scalar_one_or_none()
        files = sa.select(memory_files.c.id).where(memory_files.c.namespace_id == ns_id)

        def count(table: sa.Table, where: sa.ColumnElement[bool]) -> int:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(table).where(where)
                ).scalar_one()
            )

        return {
            "namespaces": count(namespaces, namespaces.c.key == namespace),
            "entries": count(entries, entries.c.namespace_id == ns_id),
            "memory_files": count(memory_files, memory_files.c.namespace_id == ns_id),
            "file_versions": count(file_versions, file_versions.c.file_id.in_(files)),
            "ledger": count(candidate_ledger, candidate_ledger.c.namespace_id == ns_id),
            "outbox": count(outbox, outbox.c.namespace == namespace),
            "runs": count(runs, runs.c.namespace == namespace),
        }


def test_commit_batch_writes_versions_entries_ledger_outbox_and_run(store: MemoryStore) -> None:
    ns = unique_ns()
    e1, e2 = entry("e1", "Likes tea"), entry("e2", "Lives in Lyon")

    result = commit(store, ns, plan((e1, e2)), expected=0, sinks=("files", "langgraph"))

    assert result.version == 1
    assert result.files == ((FACTS, 1),)
    assert len(result.outbox_ids) == 2
    state = store.load_state(ns)
    assert (state.version, state.applied_position) == (1, "1-0")
    assert [e.id for e in state.entries] == ["e1", "e2"]
    assert store.current_files(ns) == {FACTS: render(e1, e2)}
    assert store.already_recorded(ns, ["c-e1", "c-e2", "c-other"]) == {"c-e1", "c-e2"}
    assert {i.sink for i in store.due_outbox(sink=None, now=T0) if i.namespace == ns} == {
        "files",
        "langgraph",
    }
    [stored_run] = store.runs(namespace=ns)
    assert (stored_run.id, stored_run.outcome, stored_run.counts["added"]) == (
        result.run_id,
        "ok",
        2,
    )


def test_second_commit_appends_a_file_version(store: MemoryStore) -> None:
    ns = unique_ns()
    e1, e2 = entry("e1", "Likes tea"), entry("e2", "Lives in Lyon", now=at(1))
    commit(store, ns, plan((e1,)), expected=0)

    result = commit(
        store, ns, plan((e2,), files={FACTS: render(e1, e2)}), expected=1, now=at(1), position="2-0"
    )

    assert result.version == 2
    assert result.files == ((FACTS, 2),)
    assert [v.version for v in store.file_history(ns, FACTS)] == [1, 2]
    assert store.load_state(ns).applied_position == "2-0"


def test_changed_entries_are_updated_and_invalid_ones_leave_the_state(store: MemoryStore) -> None:
    ns = unique_ns()
    old = entry("e1", "Prefers tea")
    commit(store, ns, plan((old,)), expected=0)
    new = entry("e2", "Prefers coffee", now=at(1))
    superseded = old.model_copy(
        update={"invalid_at": at(1), "invalid_reason": "superseded", "superseded_by": "e2"}
    )

    commit(store, ns, plan((new,), (superseded,)), expected=1, now=at(1))

    assert [e.id for e in store.load_state(ns).entries] == ["e2"]
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(entries)
            .join(namespaces, namespaces.c.id == entries.c.namespace_id)
            .where(namespaces.c.key == ns, entries.c.id == "e1")
        ).one()
    assert (row.superseded_by, row.invalid_at) == ("e2", at(1))


def test_commit_with_a_stale_expected_version_raises_and_writes_nothing(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Likes tea"),)), expected=0, sinks=("files",))
    before = _counts(store, ns)

    with pytest.raises(StaleVersion, match="no longer at version 0"):
        commit(store, ns, plan((entry("e2", "Likes cake"),)), expected=0, sinks=("files",))

    assert _counts(store, ns) == before
    assert store.load_state(ns).version == 1


def test_redelivered_batch_raises_stale_and_writes_nothing(store: MemoryStore) -> None:
    ns = unique_ns()
    batch = plan((entry("e1", "Likes tea"),))
    commit(store, ns, batch, expected=0, sinks=("files",))
    before = _counts(store, ns)
    # The same candidates again, even against the current version (a zombie that reloaded).
    again = plan((entry("e9", "Likes tea"),), candidates=("c-e1",))

    with pytest.raises(StaleVersion, match="redelivered"):
        commit(store, ns, again, expected=1, sinks=("files",))

    assert _counts(store, ns) == before


def _race(store: MemoryStore, ns: str, expected: int) -> list[object]:
    """Two threads commit different batches on ``ns`` at once; returns each one's outcome."""
    barrier = threading.Barrier(2)
    outcomes: list[object] = [None, None]

    def worker(i: int) -> None:
        applied = plan((entry(f"race{i}", f"Fact {i}"),))
        barrier.wait()
        try:
            outcomes[i] = commit(store, ns, applied, expected=expected, sinks=("files",)).version
        except StaleVersion as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return outcomes


def test_concurrent_commits_on_the_same_version_exactly_one_wins(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e0", "Seed"),)), expected=0)

    outcomes = _race(store, ns, expected=1)

    assert sorted(type(o).__name__ for o in outcomes) == ["StaleVersion", "int"]
    assert store.load_state(ns).version == 2
    assert _counts(store, ns)["entries"] == 2


def test_concurrent_first_commits_exactly_one_creates_the_namespace(store: MemoryStore) -> None:
    ns = unique_ns()

    outcomes = _race(store, ns, expected=0)

    assert sorted(type(o).__name__ for o in outcomes) == ["StaleVersion", "int"]
    assert _counts(store, ns)["entries"] == 1
    assert _counts(store, ns)["outbox"] == 1


def test_invalid_row_mid_transaction_leaves_nothing_written(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Likes tea"),)), expected=0, sinks=("files",))
    before = _counts(store, ns)
    # Fence, run, entries and file versions are written before the duplicate entry id fails.
    bad = AppliedPlan(
        new_entries=(entry("e2", "A"), entry("e2", "B")),
        changed_entries=(),
        files=(FileChange(FACTS, "- A\n- B\n", "+", "- Likes tea\n"),),
        ledger=(LedgerRow("c-x", "t1", "merged"),),
    )

    with pytest.raises(StoreError, match="rolled back"):
        commit(store, ns, bad, expected=1, sinks=("files",))

    assert _counts(store, ns) == before
    assert store.load_state(ns).version == 1


def test_changed_entry_that_does_not_exist_is_an_invalid_plan(store: MemoryStore) -> None:
    ns = unique_ns()
    ghost = entry("ghost", "Never stored")

    with pytest.raises(InvalidPlan, match="ghost does not exist"):
        commit(store, ns, plan((), (ghost,), candidates=("c1",)), expected=0)

    assert _counts(store, ns)["namespaces"] == 0


def test_entries_are_isolated_per_namespace_even_with_the_same_id(store: MemoryStore) -> None:
    a, b = unique_ns(), unique_ns()
    commit(store, a, plan((entry("same", "A's fact"),)), expected=0)
    commit(store, b, plan((entry("same", "B's fact"),)), expected=0)

    assert [e.text for e in store.load_state(a).entries] == ["A's fact"]
    assert [e.text for e in store.load_state(b).entries] == ["B's fact"]


def test_timestamps_come_back_timezone_aware_utc(store: MemoryStore) -> None:
    ns = unique_ns()
    commit(store, ns, plan((entry("e1", "Likes tea"),)), expected=0, sinks=("files",))

    [loaded] = store.load_state(ns).entries
    [version] = store.file_history(ns, FACTS)
    [item] = [i for i in store.due_outbox(sink="files", now=T0) if i.namespace == ns]

    stamps = [loaded.created_at, loaded.valid_from, version.created_at, item.modified_at]
    assert all(t.utcoffset() == timedelta(0) for t in stamps)
    assert stamps == [T0] * 4


def test_naive_now_is_refused(store: MemoryStore) -> None:
    ns = unique_ns()

    with pytest.raises(StoreError, match="naive datetime"):
        commit(store, ns, plan((entry("e1", "x"),)), expected=0, now=T0.replace(tzinfo=None))

    assert store.load_state(ns).version == 0


def test_run_for_another_namespace_is_refused(store: MemoryStore) -> None:
    ns, other = unique_ns(), unique_ns()

    with pytest.raises(StoreError, match="the run is for"):
        store.commit_batch(
            namespace=ns,
            expected_version=0,
            applied_position=None,
            applied=plan((entry("e1", "x"),)),
            run=run(other),
            sinks=(),
            now=T0,
        )


def test_pending_approvals_are_committed_with_the_batch(store: MemoryStore) -> None:
    ns = unique_ns()
    approval = PendingApproval("/memories/org.md", {"op": "add", "text": "x"}, ("c9",))

    commit(store, ns, plan(candidates=("c9",), approvals=(approval,)), expected=0)

    [pending] = store.pending_approvals(namespace=ns)
    assert (pending.path, pending.candidate_ids, pending.status) == (
        "/memories/org.md",
        ("c9",),
        "pending",
    )
