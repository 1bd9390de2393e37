"""The ``memworker`` command's entry point, and the app it runs (:mod:`worker.cli.root`).

``memworker --version`` is answered here, without Typer: the command is run on every deploy
and health check, and building the Typer app (Typer, Rich, every command's module) costs
several times what printing a version line does. Every other command line goes to the app,
which prints the same line for ``--version`` among other options. ``app`` and ``app_for``
are loaded on first use (PEP 562), so importing this module imports neither.

The console script (and ``python -m worker``) is :func:`main`; it raises ``SystemExit`` like
any Typer app, so code that runs a command in-process keeps control.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any, Final

from worker.cli.version import version_line

if TYPE_CHECKING:
    from worker.cli.root import COMMAND_MODULES, app, app_for

__all__ = ["COMMAND_MODULES", "app", "app_for", "main", "version_line"]

#: The command line answered without building the app.
VERSION_ARGS: Final = ["--version"]

#: What :mod:`worker.cli.root` provides, loaded on first use.
_LAZY: Final = ("COMMAND_MODULES", "app", "app_for")


def main() -> None:
    """Run the command line ``sys.argv[1:]``: a Typer app's ``SystemExit`` ends it, except for
    ``--version``, which returns."""
    args = sys.argv[1:]
    if args == VERSION_ARGS:
        sys.stdout.write(version_line() + "\n")
        return
    importlib.import_module("worker.cli.root").app_for(args)()


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("worker.cli.root"), name)
    raise AttributeError(f"module 'worker.cli.app' has no attribute {name!r}")
