"""The ``memworker`` command: its entry point here, the Typer app in :mod:`worker.cli.app`.

``memworker --version`` is answered here, without Typer: the command is run on every deploy
and health check, and building the app (Typer, Rich, every command's module) costs several
times what printing a version line does. Every other command line goes to the app, which
prints the same line for ``--version`` among its options.

The console script (and ``python -m worker``) is :func:`main`; it raises ``SystemExit`` like
any Typer app, so code that runs a command in-process keeps control.

>>> version_line().split()[0]
'memworker'
"""

from __future__ import annotations

import importlib
import sys
from typing import Final

from worker import __version__

#: The command line answered without building the app.
VERSION_ARGS: Final = ["--version"]


def version_line() -> str:
    """What ``memworker --version`` prints."""
    return f"memworker {__version__}"


def main() -> None:
    """Run the command line ``sys.argv[1:]``: a Typer app's ``SystemExit`` ends it, except for
    ``--version``, which returns."""
    args = sys.argv[1:]
    if args == VERSION_ARGS:
        sys.stdout.write(version_line() + "\n")
        return
    importlib.import_module("worker.cli.app").app_for(args)()
