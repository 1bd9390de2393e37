"""The ``memworker`` Typer app: commands registered from the command modules, help that teaches.

``--help`` that teaches: one example per command, and flags shown without a type label.

The examples live here, in one table keyed by the command's path, rather than beside each
command: a test walks every command the app has and fails when one lacks an example, or when
an example no longer parses (an option renamed, an argument added). The root group class
:class:`MemworkerGroup` puts each example in its command's epilog and clears the ``<bool>``
label Typer prints for flags such as ``--json`` or ``--help`` (a flag takes no value).

The ``memworker`` Typer app: commands registered from one module per area.

Every command builds :class:`~worker.settings.Settings` here, at the edge, and turns any
:class:`~worker.errors.MemworkerError` into one clear line on stderr and a non-zero exit code.
The console script's entry point is :func:`worker.cli.app.main`, which loads this module
(Typer, Rich and every command's module) only for a command line it has to parse.
"""

from __future__ import annotations

import importlib
from typing import Annotated, Any, Final

import typer
from rich.markup import escape
from typer.core import TyperGroup

from worker.cli import version_line

#: One runnable example per command, by command path. Shown under "Example" in ``--help``.
EXAMPLES: Final[dict[str, str]] = {
    "enqueue": 'memworker enqueue --user u1 --key preference.language "Reply in French"',
    "status": "memworker status --json",
    "show": "memworker show --user u1 --path preferences",
    "search": 'memworker search --user u1 "food allergy"',
    "why": 'memworker why --user u1 "vegetarian"',
    "candidate": "memworker candidate 0f3c9a1e2b7d4c5a8e6f1a2b3c4d5e6f --user u1",
    "console": "memworker console --port 8377",
    "history": "memworker history --user u1 --path preferences",
    "diff": "memworker diff --user u1 --path preferences 1 2",
    "rollback": "memworker rollback --user u1 --path preferences --to 1",
    "run": "memworker run --data-dir ./memworker-data",
    "worker": "memworker worker --concurrency 8",
    "beat": "memworker beat --loglevel WARNING",
    "schedules": "memworker schedules --json",
    "reconcile": "memworker reconcile --user u1 --dry-run",
    "publish": "memworker publish --all --sink langgraph",
    "scan": "memworker scan --user u1 --since 2d",
    "put": "memworker put --org acme --path policies/compliance.md compliance.md",
    "forget": "memworker forget --user u1 --all-assistants",
    "export": "memworker export --user u1 --out u1.json",
    "import": "memworker import u1.json --namespace user:u2",
    "db": "memworker db upgrade",
    "db upgrade": "memworker db upgrade",
    "db current": "memworker db current --database-url postgresql+psycopg://memworker@db/memworker",
    "dlq": "memworker dlq list",
    "dlq list": "memworker dlq list --json",
    "dlq retry": "memworker dlq retry user:u1",
    "dlq drop": "memworker dlq drop user:u1 --yes",
    "approvals": "memworker approvals list",
    "approvals list": "memworker approvals list --org acme",
    "approvals approve": "memworker approvals approve 7",
    "approvals reject": "memworker approvals reject 7 --by operator:ana",
    "store": "memworker store migrate-orgs --dry-run",
    "store migrate-orgs": "memworker store migrate-orgs --dry-run",
}


def epilog_for(path: str) -> str | None:
    """The epilog ``--help`` shows under the command at ``path`` (e.g. ``"dlq retry"``)."""
    example = EXAMPLES.get(path)
    return None if example is None else f"Example:\n\n{escape(example)}"


def _unlabel_flag(param: Any) -> None:
    """A flag takes no value, so its type column stays empty instead of ``<bool>``."""
    if param is not None and getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""


def _polish(command: Any, path: str) -> None:
    for param in command.params:
        _unlabel_flag(param)
    if command.epilog is None:
        command.epilog = epilog_for(path)
    for name, sub in getattr(command, "commands", {}).items():
        _polish(sub, f"{path} {name}".strip())


def _unlabel_help_options(command: Any, ctx: Any) -> None:
    _unlabel_flag(command.get_help_option(ctx))
    for sub in getattr(command, "commands", {}).values():
        _unlabel_help_options(sub, ctx)


class MemworkerGroup(TyperGroup):
    """The root ``memworker`` group: examples in every epilog, no type label on flags."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        _polish(self, "")

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        _unlabel_flag(option)
        return option

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _unlabel_help_options(command, ctx)  # created lazily, per context
        return command


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
    ("worker.cli.queue", "register_queue"),
    ("worker.cli.run", "register_db"),
    ("worker.cli.memory", "register_memory"),
    ("worker.cli.memory", "register_why"),
    ("worker.cli.ops", "register_console"),
    ("worker.cli.run", "register_run"),
    ("worker.cli.run", "register_schedules"),
    ("worker.cli.ops", "register_reconcile"),
    ("worker.cli.ops", "register_publish"),
    ("worker.cli.ops", "register_scan"),
    ("worker.cli.queue", "register_dlq"),
    ("worker.cli.memory", "register_approvals"),
    ("worker.cli.memory", "register_put"),
    ("worker.cli.ops", "register_forget"),
    ("worker.cli.ops", "register_transfer"),
    ("worker.cli.ops", "register_store"),
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
