"""``memworker --version``: the installed version, without touching Redis or the database."""

from __future__ import annotations

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
