"""The workers record their sinks in Redis at start; an operator command that would write to
fewer sinks refuses (nothing changed), and ``memworker status`` shows the set and the gap."""

from __future__ import annotations

from tests.integration.test_cli_support import Ops, ops
from worker.service.sweep import prepare_queue

__all__ = ["ops"]

#: What a deployment with the LangGraph store sink records.
WORKERS_SINKS = ["files", "langgraph"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_workers_start_records_its_sinks_in_redis(ops: Ops) -> None:
    prepare_queue(ops.queue.admin, sinks=WORKERS_SINKS)

    assert ops.queue.admin.workers_sinks() == WORKERS_SINKS


def test_before_any_worker_started_no_sinks_are_recorded(ops: Ops) -> None:
    assert ops.queue.admin.workers_sinks() is None


def test_reconcile_with_fewer_sinks_than_the_workers_refuses_and_changes_nothing(
    ops: Ops,
) -> None:
    ops.queue.admin.record_sinks(WORKERS_SINKS)
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user)

    assert ran.code == 2
    assert "the workers publish to files, langgraph" in _one_line(ran.err)
    assert "langgraph would never receive what it writes" in _one_line(ran.err)
    assert ops.store.current_files(f"user:{ops.user}") == {}
    assert ops.queue.admin.namespace_state(f"user:{ops.user}").pending == 1


def test_forget_with_fewer_sinks_than_the_workers_erases_nothing(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops("reconcile", "--user", ops.user)
    ops.queue.admin.record_sinks(WORKERS_SINKS)

    ran = ops("forget", "--user", ops.user, "--yes")

    assert ran.code == 2
    assert ops.store.current_files(f"user:{ops.user}") != {}


def test_a_dry_run_needs_no_sinks_of_the_workers(ops: Ops) -> None:
    ops.queue.admin.record_sinks(WORKERS_SINKS)
    ops.enqueue("I prefer green tea")

    assert ops("reconcile", "--user", ops.user, "--dry-run").code == 0


def test_reconcile_with_the_workers_sinks_runs(ops: Ops) -> None:
    ops.queue.admin.record_sinks(["files"])
    ops.enqueue("I prefer green tea")

    assert ops("reconcile", "--user", ops.user).code == 0


def test_status_shows_the_workers_sinks_and_what_this_shell_lacks(ops: Ops) -> None:
    ops.queue.admin.record_sinks(WORKERS_SINKS)

    report = ops("status", "--json").json()["worker_sinks"]
    text = _one_line(ops("status").out)

    assert report == {
        "workers": WORKERS_SINKS,
        "here": ["files"],
        "missing_here": ["langgraph"],
        "not_in_workers": [],
    }
    assert "sinks: the workers publish to files, langgraph" in text
    assert "this shell's MEMWORKER_SINKS (files) lacks langgraph" in text


def test_status_says_when_no_worker_recorded_its_sinks(ops: Ops) -> None:
    assert "no worker has recorded its sinks yet" in _one_line(ops("status").out)


def test_the_workers_start_records_the_sinks_of_their_settings(ops: Ops) -> None:
    from worker.cli.run import _prepare

    settings = ops.settings.model_copy(update={"sinks": ["files", "tests.x:Sink"]})
    _prepare(settings, model=True)

    assert ops.queue.admin.workers_sinks() == ["files", "tests.x:Sink"]


def test_beats_start_leaves_the_workers_record_alone(ops: Ops) -> None:
    from worker.cli.run import _prepare

    ops.queue.admin.record_sinks(WORKERS_SINKS)
    _prepare(ops.settings)

    assert ops.queue.admin.workers_sinks() == WORKERS_SINKS
