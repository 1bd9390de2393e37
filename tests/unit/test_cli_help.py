"""``memworker … --help``: every command shows one example that parses, and flags carry no type.

The examples are in :data:`worker.cli.app.EXAMPLES`; these tests walk the command tree the
app really has, so a new command without an example, or an example an option rename broke,
fails here.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from worker.cli.app import EXAMPLES, app, app_for


def _commands(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, groups included (``("dlq",)``, ``("dlq", "retry")``, …)."""
    found = [path] if path else []
    for name, sub in getattr(command, "commands", {}).items():
        found.extend(_commands(sub, (*path, name)))
    return found


ROOT = get_command(app)
COMMANDS = _commands(ROOT)


def _help(path: tuple[str, ...]) -> str:
    ran = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert ran.exit_code == 0, ran.output
    return ran.output


def test_every_command_has_exactly_one_example_and_no_example_names_a_missing_command() -> None:
    paths = {" ".join(p) for p in COMMANDS}

    assert sorted(paths - EXAMPLES.keys()) == []
    assert sorted(EXAMPLES.keys() - paths) == []


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_shows_the_commands_example(path: tuple[str, ...]) -> None:
    shown = " ".join(_help(path).split())

    assert f"Example: {EXAMPLES[' '.join(path)]}" in shown


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_labels_no_flag_with_a_type(path: tuple[str, ...]) -> None:
    assert "<bool>" not in _help(path)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_each_example_is_accepted_by_its_commands_parser(path: tuple[str, ...]) -> None:
    argv = shlex.split(EXAMPLES[" ".join(path)])
    assert argv[0] == "memworker"
    # Resolve the command the example names and let its parser check options, arguments and
    # types (without running it): a usage error raises here.
    command: Any = ROOT
    args = argv[1:]
    while hasattr(command, "commands") and args and args[0] in command.commands:
        command = command.commands[args.pop(0)]
    command.make_context(command.name, args)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_the_app_main_runs_a_command_with_shows_the_same_help_as_the_whole_app(
    path: tuple[str, ...],
) -> None:
    only = CliRunner().invoke(app_for(list(path)), [*path, "--help"], env={"COLUMNS": "200"})

    assert only.exit_code == 0, only.output
    assert only.output == _help(path)


def test_the_whole_app_runs_anything_that_does_not_name_a_command_first() -> None:
    assert app_for([]) is app
    assert app_for(["--help"]) is app
    assert app_for(["--version"]) is app
    assert app_for(["statu"]) is app


def _command_at(path: tuple[str, ...]) -> Any:
    command: Any = ROOT
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_the_description_a_command_list_shows_is_one_whole_line(path: tuple[str, ...]) -> None:
    """``--help`` lists each command with its first paragraph, line breaks kept: a paragraph
    wrapped in the source would show cut in the middle of a sentence."""
    first = (_command_at(path).help or "").strip().split("\n\n")[0]

    assert first
    assert "\n" not in first
