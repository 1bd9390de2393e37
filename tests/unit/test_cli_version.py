"""``memworker --version``: the installed version, without touching Redis or the database."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from worker import __version__
from worker.cli.app import app


def test_version_prints_the_package_version_and_exits_zero() -> None:
    ran = CliRunner().invoke(app, ["--version"], env={"MEMWORKER_REDIS_URL": "redis://0.0.0.0:1"})

    assert ran.exit_code == 0
    assert ran.output == f"memworker {__version__}\n"


def test_no_arguments_still_show_the_commands() -> None:
    ran = CliRunner().invoke(app, [])

    assert "reconcile" in ran.output


def test_the_entry_point_prints_the_same_version_line_as_the_app() -> None:
    code = "import sys\nsys.argv = ['memworker', '--version']\nfrom worker.cli import main\nmain()"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    by_app = CliRunner().invoke(app, ["--version"])

    assert (ran.returncode, ran.stdout, ran.stderr) == (0, by_app.output, "")
