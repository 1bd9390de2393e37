"""The ``memworker`` Typer app: commands registered from one module per area.

Every command builds :class:`~worker.settings.Settings` here, at the edge, and turns any
:class:`~worker.errors.MemworkerError` into one clear line on stderr and a non-zero exit code.
The console script's entry point is :func:`worker.cli.app.main`, which loads this module
(Typer, Rich and every command's module) only for a command line it has to parse.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from worker.cli.help import MemworkerGroup
from worker.cli import version_line


def _new_app() -> typer.Typer:
    return typer.Typer(
        name="memworker",
        cls=MemworkerGroup,
        help="Background memory consolidation for LLM chat services.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )


app = _new_app()

#: Where the commands come from: a module, and its function that adds them to ``app``.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("worker.cli.queue_cmds", "register_queue"),
    ("worker.cli.db_cmds", "register_db"),
    ("worker.cli.memory_cmds", "register_memory"),
    ("worker.cli.ops_why", "register_why"),
    ("worker.cli.ops_console", "register_console"),
    ("worker.cli.run_cmds", "register_run"),
    ("worker.cli.schedule_cmds", "register_schedules"),
    ("worker.cli.ops_reconcile", "register_reconcile"),
    ("worker.cli.ops_publish", "register_publish"),
    ("worker.cli.ops_scan", "register_scan"),
    ("worker.cli.ops_dlq", "register_dlq"),
    ("worker.cli.ops_approvals", "register_approvals"),
    ("worker.cli.ops_put", "register_put"),
    ("worker.cli.ops_forget", "register_forget"),
    ("worker.cli.ops_transfer", "register_transfer"),
    ("worker.cli.store_cmds", "register_store"),
)

for _module, _register in COMMANDS:
    getattr(importlib.import_module(_module), _register)(app)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Background memory consolidation for LLM chat services."""


def app_for(args: list[str]) -> typer.Typer:
    """The app that runs ``memworker <args>``: for a command (or command group) named first,
    one holding only that command, with the same options; for anything else (no command,
    ``--help``, ``--version``, an unknown name) the whole app.

    Before it runs one command, Typer builds every command an app holds (each signature's
    annotations evaluated, a type adapter per option): for a short command such as ``status``
    that is a sizeable part of its start. The command itself, its help and its errors are the
    same in both apps.
    """
    name = args[0] if args else None
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    only = _new_app()
    only.registered_callback = app.registered_callback
    only.registered_commands = commands
    only.registered_groups = groups
    return only
