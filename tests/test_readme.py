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
