"""The README's operator walkthrough, run command by command as a new operator would.

The walkthrough is a ```console block: ``$ memworker …`` lines are run through the CLI (each
must exit 0); the lines under a command are key output that must appear in what it printed
(whitespace-insensitive). Table rows (box-drawing lines) are illustrations and not compared:
they hold times and column widths that differ per run.

Before the walkthrough the test sets the scene it describes: while the model provider was
down, user ``ben``'s batch failed until it was dead-lettered.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Final

from tests.test_cli_support import Ops, ops

__all__ = ["ops"]

REPO = Path(__file__).resolve().parent.parent
#: The walkthrough lives in the README only: what a new operator reads is what runs here.
SOURCES: Final = (REPO / "README.md",)
BLOCK: Final = re.compile(r"```console\n(.*?)```", re.DOTALL)
BOX: Final = re.compile(r"[│┃━─┏┓┗┛┡┩└┘┌┐╇╋]")


def walkthrough() -> list[tuple[list[str], list[str]]]:
    """(command argv, expected lines) for each ``$ memworker`` line of the operator block."""
    for source in SOURCES:
        text = source.read_text(encoding="utf-8") if source.exists() else ""
        for block in BLOCK.findall(text):
            if "memworker rollback" in block and "memworker dlq" in block:
                return _steps(block)
    raise AssertionError("no operator walkthrough block found in the README")


def _steps(block: str) -> list[tuple[list[str], list[str]]]:
    steps: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            argv = shlex.split(line[2:])
            assert argv[0] == "memworker", line
            steps.append((argv[1:], []))
        elif line.strip() and not BOX.search(line):
            steps[-1][1].append(line)
    return steps


def _flat(text: str) -> str:
    return " ".join(text.split())


def _dead_letter(ops: Ops, user: str) -> None:
    ops.enqueue("Remember that I work night shifts", user=user)
    for _ in range(ops.settings.max_attempts):
        claim = ops.queue.claim_namespace(f"user:{user}")
        assert claim is not None
        ops.queue.fail(claim, "ConsolidatorError: model provider timed out after 30 s")


def test_the_walkthrough_block_has_the_incident_commands() -> None:
    commands = [" ".join(argv[:2]) for argv, _ in walkthrough()]

    assert {"history --user", "diff --user", "rollback --user", "dlq list", "dlq retry"} <= set(
        commands
    )


def test_the_operator_walkthrough_runs_as_written(ops: Ops) -> None:
    _dead_letter(ops, "ben")

    for argv, expected in walkthrough():
        ran = ops(*argv)
        shown = _flat(ran.out)
        assert ran.code == 0, f"memworker {shlex.join(argv)} exited {ran.code}: {ran.err}"
        for line in expected:
            assert _flat(line) in shown, f"memworker {shlex.join(argv)} did not print {line!r}"
