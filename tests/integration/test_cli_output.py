"""What the CLI writes to a pipe or a file: whole lines, never wrapped at 80 columns.

Real subprocesses with their stdout and stderr on pipes, as in ``memworker show > file`` or
``memworker status 2>&1 | grep``; ``--json`` stays the machine format.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]

#: Bounds one CLI subprocess (start-up is a second or two; a loaded machine is slower).
CLI_TIMEOUT_SECONDS = 120

#: Longer than any terminal default, so wrapping would show.
LONG = "Remember that my favourite books are " + ", ".join(f"volume {n}" for n in range(40))


def _piped(ops: Ops, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    clean.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "worker", *args],
        env={**clean, **ops.env, **env},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )


def test_a_long_memory_line_reaches_a_pipe_in_one_piece(ops: Ops) -> None:
    ops.enqueue(LONG)
    ops("reconcile", "--user", ops.user)

    shown = _piped(ops, "show", "--user", ops.user)

    assert shown.returncode == 0, shown.stderr
    assert f"- {LONG}" in shown.stdout.splitlines()


def test_a_reconcile_diff_reaches_a_pipe_unwrapped(ops: Ops) -> None:
    ops.enqueue(LONG)

    ran = _piped(ops, "reconcile", "--user", ops.user)

    assert ran.returncode == 0, ran.stderr
    assert f"+- {LONG}" in ran.stdout.splitlines()


def test_a_long_error_reaches_a_piped_stderr_as_one_line(ops: Ops) -> None:
    ran = _piped(ops, "status", MEMWORKER_REDIS_URL="redis://127.0.0.1:1/0")

    assert ran.returncode == 4
    (line,) = ran.stderr.splitlines()
    assert line.startswith("error: Redis at redis://127.0.0.1:1/0 is unreachable")
    assert line.endswith("or fix MEMWORKER_REDIS_URL")


def test_a_long_file_header_reaches_a_pipe_uncut(ops: Ops) -> None:
    assistant = "a" * 60  # the header line is then over 100 characters
    ops.enqueue("I prefer green tea", assistant_id=assistant, topic="preferences")
    ops("reconcile", "--user", ops.user, "--assistant", assistant)

    shown = _piped(ops, "show", "--user", ops.user, "--assistant", assistant)

    assert f"user:{ops.user}:{assistant} /memories/preferences.md" in shown.stdout


def test_a_table_row_reaches_a_pipe_as_one_line(ops: Ops) -> None:
    ns, error = f"user:{ops.user}", "ConsolidatorError: " + LONG
    ops.enqueue("I prefer green tea")
    for _ in range(ops.settings.max_attempts):
        claim = ops.queue.claim_namespace(ns)
        assert claim is not None
        ops.queue.fail(claim, error)

    listed = _piped(ops, "dlq", "list")

    (row,) = [line for line in listed.stdout.splitlines() if ns in line]
    assert error in row
