"""How a long use case reports progress to whoever shows it (a CLI progress bar), without
knowing how it is shown: it opens the display with its number of steps and tells it each
step done, by name.

>>> with no_progress(3) as advance:
...     advance("user:u1")
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

#: Opens a progress display for a number of steps; what it yields is told each one done.
Progress = Callable[[int], AbstractContextManager[Callable[[str], None]]]


def _no_progress(_step: str) -> None:
    return None


@contextlib.contextmanager
def no_progress(_total: int) -> Iterator[Callable[[str], None]]:
    """The display of a caller that shows none."""
    yield _no_progress
