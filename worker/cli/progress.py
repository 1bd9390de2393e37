"""The CLI's progress bars: on stderr (stdout stays the report), shown only on a terminal.

A long command (``reconcile --all``, ``publish --all``, ``import``, ``forget``, ``dlq retry
--all``) shows how far it got while it runs; piped into a file or a script, or captured by a
test, it prints no bar at all (Rich's ``console.is_terminal``), so its output is only the
report. The bar is transient: once done, it leaves no line behind.

>>> import io
>>> from worker.cli.console import CliConsole
>>> with progress_bar(2, "reconcile", console=CliConsole(file=io.StringIO())) as advance:
...     advance("user:u1")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from worker.service.progress import Progress


def _nothing(_step: str) -> None:
    return None


@contextlib.contextmanager
def progress_bar(
    total: int, what: str, *, console: Console | None = None
) -> Iterator[Callable[[str], None]]:
    """A bar of ``total`` steps labelled ``what`` on ``console`` (stderr by default); yields
    what is told each step done, by name. Nothing is shown off a terminal or for no steps."""
    if console is None:
        from worker.cli.errors import stderr

        console = stderr
    if total <= 0 or not console.is_terminal:
        yield _nothing
        return
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn(f"[bold]{escape(what)}[/bold] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=total)
        yield lambda step: bar.update(task, advance=1, description=escape(step))


def progress_of(what: str, *, show: bool = True) -> Progress:
    """A :data:`worker.service.progress.Progress` for a use case: bars labelled ``what``
    (none when ``show`` is false, e.g. for ``--json``)."""

    def opened(total: int) -> AbstractContextManager[Callable[[str], None]]:
        return progress_bar(total if show else 0, what)

    return opened
