"""How every CLI command reports failure: one line, what was wrong and what to do; no traceback."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer
from rich.markup import escape

from worker.cli.console import make_console
from worker.errors import MemworkerError, NotFound, Unavailable, UsageError

#: Exit codes, so scripts can tell a usage mistake from an outage.
EXIT_DECLINED = 0  #: the operator answered no at a confirmation: nothing changed, by choice
EXIT_FAILURE = 1  #: the operation failed (e.g. a plan was rejected)
EXIT_USAGE = 2  #: bad input or configuration: fix the command or the settings
EXIT_NOT_FOUND = 3  #: the user, file or version asked for does not exist
EXIT_UNAVAILABLE = 4  #: Redis, the database, a sink or the model could not be reached

stderr = make_console(stderr=True)


def exit_code_for(exc: MemworkerError) -> int:
    """The exit code of an error's tier (see :mod:`worker.errors`).

    >>> from worker.errors import InvalidOption, StoreUnavailable, StaleVersion
    >>> [exit_code_for(e("x")) for e in (InvalidOption, StoreUnavailable, StaleVersion)]
    [2, 4, 1]
    """
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    if isinstance(exc, NotFound):
        return EXIT_NOT_FOUND
    if isinstance(exc, Unavailable):
        return EXIT_UNAVAILABLE
    return EXIT_FAILURE


@contextlib.contextmanager
def cli_errors() -> Iterator[None]:
    """Turn memworker errors into ``error: …`` on stderr and the matching exit code."""
    try:
        yield
    except MemworkerError as exc:
        # Escaped: the message may quote user input, which must not be read as Rich markup.
        stderr.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(exit_code_for(exc)) from None
