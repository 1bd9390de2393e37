"""The README is the user's guide: its reference parts must match the code."""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from worker.cli.app import app
from worker.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_setting_is_in_the_configuration_reference() -> None:
    missing = [
        f"MEMWORKER_{name.upper()}"
        for name in Settings.model_fields
        if f"| `MEMWORKER_{name.upper()}` |" not in README
    ]
    assert missing == []


def test_every_command_is_documented() -> None:
    commands = get_command(app).commands  # type: ignore[attr-defined]
    missing = [name for name in commands if f"memworker {name}" not in README]
    assert missing == []


def test_ci_runs_the_readme_test_command() -> None:
    match = re.search(r"\$ pip install -e \"\.\[dev\]\" && (python -m pytest)\n", README)
    assert match is not None
    assert match.group(1) in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def _command_rows() -> dict[str, str]:
    """The command table's rows, by each ``memworker NAME`` they document."""
    table = README[README.index("## Command line") : README.index("exit code | meaning")]
    rows: dict[str, str] = {}
    for row in table.splitlines():
        for cell in re.findall(r"`memworker ([a-z]+)[^`]*`", row):
            rows.setdefault(cell, "")
            rows[cell] += row
    return rows


def test_the_command_table_lists_each_commands_required_options_and_its_user() -> None:
    rows = _command_rows()
    missing = []
    for name, command in get_command(app).commands.items():  # type: ignore[attr-defined]
        for sub in getattr(command, "commands", {"": command}).values():
            names = {opt for p in sub.params for opt in p.opts if opt.startswith("--")}
            required = {opt for p in sub.params if p.required for opt in p.opts if "--" in opt}
            wanted = required | ({"--user"} & names)
            missing += [f"{name}: {opt}" for opt in sorted(wanted) if opt not in rows.get(name, "")]
    assert missing == []


def test_every_exit_code_is_documented() -> None:
    from worker.cli import errors

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    table = README[README.index("| exit code | meaning |") :].split("\n\n", 1)[0]

    assert sorted(codes) == sorted(int(c) for c in re.findall(r"^\| `(\d)` \|", table, re.M))
