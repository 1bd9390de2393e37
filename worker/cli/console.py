"""Where the CLI's human-readable output goes: Rich consoles that never wrap a piped line.

On a terminal, Rich lays text and tables out to the terminal's width. Written to a pipe or a
file, it would assume 80 columns and break long lines (a diff line, an error message, a table
row) in the middle, so ``memworker status > status.txt`` or ``| grep`` would see fragments.
Off a terminal these consoles are as wide as :data:`PIPED_WIDTH`: text is never wrapped and
tables take their natural width. ``--json`` stays the machine format; this is for people.

>>> import io
>>> console = CliConsole(file=io.StringIO())
>>> console.print("x" * 200)
>>> len(console.file.getvalue().splitlines())
1
"""

from __future__ import annotations

from typing import Any, Final

from rich.console import Console, ConsoleDimensions

#: Width assumed when the output is not a terminal: wider than any line memworker prints
#: (texts are at most MEMWORKER_MAX_TEXT_BYTES), so nothing wraps; tables are only as wide
#: as their content, and rules are capped at :data:`RULE_WIDTH`.
PIPED_WIDTH: Final = 100_000

#: Width of a horizontal rule (a file header in ``memworker show``) when the console is wider.
RULE_WIDTH: Final = 80


class CliConsole(Console):
    """A Rich console without highlighting that is :data:`PIPED_WIDTH` wide off a terminal.

    The check is made at every print (not at import), so output redirected after start-up,
    or captured by a test runner, is treated as piped.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        measured = super().size
        if self.is_terminal:
            return measured
        return ConsoleDimensions(PIPED_WIDTH, measured.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def rule_width(self, title: str) -> int:
        """How wide a rule titled ``title`` is drawn: the terminal's width; off a terminal
        :data:`RULE_WIDTH`, or wider when the title needs it (a rule never cuts its title)."""
        if self.is_terminal:
            return self.width
        return max(RULE_WIDTH, len(title) + 2 * len(" ── "))


def make_console(*, stderr: bool = False) -> CliConsole:
    """The console for stdout (reports) or stderr (errors, prompts, progress)."""
    return CliConsole(stderr=stderr)
