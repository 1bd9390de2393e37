"""Short output by default: ``reconcile --all`` prints a summary (``--diff`` prints every diff),
and the long commands show a progress bar on a terminal and nothing of it anywhere else."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.integration.test_cli_support import Ops, ops
from worker.cli.common import CliConsole, progress_bar

__all__ = ["ops"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_reconcile_all_prints_the_summary_without_the_diffs(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer black coffee", user=ops.user + "b")

    ran = ops("reconcile", "--all")

    assert ran.code == 0
    assert "+- I prefer" not in ran.out
    assert "summary: 2 namespace(s): committed 2" in _one_line(ran.out)
    assert "`--diff` prints each namespace's outcome and diff" in _one_line(ran.out)


def test_reconcile_all_with_diff_prints_every_namespaces_diff(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer black coffee", user=ops.user + "b")

    ran = ops("reconcile", "--all", "--diff")

    assert "+- I prefer green tea" in ran.out
    assert "+- I prefer black coffee" in ran.out
    assert f"user:{ops.user}: committed namespace revision 1" in _one_line(ran.out)


def test_reconcile_all_still_names_a_namespace_that_failed(ops: Ops) -> None:
    broken = ops.user + "x"
    ops.enqueue("I prefer green tea", user=broken)
    ops.queue.redis.xadd(ops.queue.layout.log(f"user:{broken}"), {"c": "{bad", "i": "broken"})
    ops.enqueue("I prefer black coffee")

    ran = ops("reconcile", "--all")

    assert ran.code == 1
    assert f"user:{broken}: failed" in _one_line(ran.out)
    assert f"user:{ops.user}:" not in _one_line(ran.out)


def test_reconcile_of_one_namespace_still_prints_its_diff(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    assert "+- I prefer green tea" in ops("reconcile", "--user", ops.user).out


def test_long_commands_print_no_progress_bar_when_not_on_a_terminal(
    ops: Ops, tmp_path: Path
) -> None:
    ops.enqueue("I prefer green tea")
    reconciled = ops("reconcile", "--all")
    exported = tmp_path / "u.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    imported = ops("import", str(exported), "--namespace", f"user:{ops.user}c")
    forgot = ops("forget", "--user", ops.user, "--yes")
    retried = ops("dlq", "retry", "--all")

    assert [reconciled.err, imported.err, forgot.err, retried.err] == ["", "", "", ""]


def test_a_progress_bar_on_a_terminal_names_the_step_and_counts_them() -> None:
    screen = io.StringIO()
    terminal = CliConsole(file=screen, force_terminal=True, width=100)

    with progress_bar(2, "reconcile", console=terminal) as advance:
        advance("user:u1")
        advance("user:u2")

    shown = screen.getvalue()
    assert "reconcile" in shown
    assert "2/2" in shown


def test_a_progress_bar_off_a_terminal_writes_nothing() -> None:
    screen = io.StringIO()

    with progress_bar(2, "reconcile", console=CliConsole(file=screen)) as advance:
        advance("user:u1")

    assert screen.getvalue() == ""


def test_reconcile_all_json_is_unchanged_by_the_short_output(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    report = json.loads(ops("reconcile", "--all", "--json").out)

    assert report["namespaces"][0]["files"][0]["diff"]


class _Recorded:
    """A progress display that writes down what a use case told it."""

    def __init__(self) -> None:
        self.totals: list[int] = []
        self.steps: list[str] = []

    @contextlib.contextmanager
    def __call__(self, total: int) -> Iterator[Callable[[str], None]]:
        self.totals.append(total)
        yield self.steps.append


def test_dlq_retry_all_tells_its_progress_each_namespace_it_retries(ops: Ops) -> None:
    from tests.integration.test_cli_dlq import _dead
    from worker.service.sweep import retry_dead_letters

    dead = {_dead(ops, "database unreachable", user=f"{ops.user}-{i}") for i in range(2)}
    shown = _Recorded()

    retry_dead_letters(ops.queue.admin, progress=shown)

    assert shown.totals == [2]
    assert set(shown.steps) == dead


def test_forget_tells_its_progress_each_namespace_then_the_store_and_the_sinks(
    ops: Ops,
) -> None:
    from worker.service.transfer import erase

    ops.enqueue("I prefer green tea")
    ops("reconcile", "--user", ops.user)
    shown = _Recorded()

    runtime = ops.runtime()
    try:
        erase(runtime.queue.admin, runtime.store, runtime.sinks, [f"user:{ops.user}"],
              progress=shown)  # fmt: skip
    finally:
        runtime.close()

    assert shown.totals == [3]
    assert shown.steps == [f"user:{ops.user}", "store", "sinks"]
