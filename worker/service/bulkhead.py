"""Bulkheads and progress: one bad namespace never blocks another; long use cases report as they
go.

Progress: a long use case opens a display (a CLI progress bar) with its number of steps and
tells it each step done, by name, without knowing how it is shown.

>>> with no_progress(3) as advance:
...     advance("user:u1")

Bulkheads: every fan-out (scan, import, publish, tick, reconcile-all) runs its per-namespace
step through :class:`Bulkhead`: a step that raises sets just that namespace (or item) aside
with a named reason, the others go on, and the use case reports what it set aside. A
whole-deployment failure (Redis or the database down) sets every namespace aside with the same
reason, which is what happened; nothing is hidden behind the first error.

>>> bulkhead = Bulkhead("scan")
>>> bulkhead.run("user:a", lambda: 1), bulkhead.run("user:b", lambda: 1 // 0)
(1, None)
>>> [aside.describe() for aside in bulkhead.set_aside]
['user:b: ZeroDivisionError: integer division or modulo by zero']
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Final, TypeVar

from worker.errors import describe_error

#: Opens a progress display for a number of steps; what it yields is told each one done.
Progress = Callable[[int], AbstractContextManager[Callable[[str], None]]]


def _no_progress(_step: str) -> None:
    return None


@contextlib.contextmanager
def no_progress(_total: int) -> Iterator[Callable[[str], None]]:
    """The display of a caller that shows none."""
    yield _no_progress


log = logging.getLogger(__name__)

T = TypeVar("T")

#: Longest reason kept: errors can embed whole responses.
MAX_REASON_CHARS: Final = 500


@dataclass(frozen=True)
class SetAside:
    """What a fan-out left out and why: a namespace, or one ``item`` of it."""

    namespace: str
    reason: str
    item: str | None = None

    def describe(self) -> str:
        """One line for the CLI and the log.

        >>> SetAside("user:a", "too many lines", "/inbox/t1.md").describe()
        'user:a /inbox/t1.md: too many lines'
        """
        where = f"{self.namespace} {self.item}" if self.item else self.namespace
        return f"{where}: {self.reason}"

    def as_dict(self) -> dict[str, str | None]:
        return {"namespace": self.namespace, "item": self.item, "reason": self.reason}


@dataclass
class Bulkhead:
    """Runs per-namespace steps of one fan-out (``what``, for the log), collecting what it
    set aside instead of stopping at the first failure."""

    what: str
    set_aside: list[SetAside] = field(default_factory=list)

    def run(
        self,
        namespace: str,
        step: Callable[[], T],
        *,
        item: str | None = None,
        stops: tuple[type[BaseException], ...] = (),
    ) -> T | None:
        """``step()``, or None when it raised: then ``namespace`` (``item``) is set aside.

        An error of a kind in ``stops`` is raised instead: the caller has said that such a
        failure (its whole deployment down) ends the fan-out rather than one namespace.
        """
        try:
            return step()
        except stops:
            raise
        except Exception as exc:  # any failure of one namespace stays that namespace's
            self.skip(namespace, describe_error(exc), item=item)
            return None

    def skip(self, namespace: str, reason: str, *, item: str | None = None) -> None:
        """Set ``namespace`` (or its ``item``) aside for a reason found without an error."""
        aside = SetAside(namespace, reason[:MAX_REASON_CHARS], item)
        log.warning("%s set aside %s", self.what, aside.describe())
        self.set_aside.append(aside)

    def namespaces(self) -> set[str]:
        """The namespaces set aside as a whole (not just one of their items)."""
        return {a.namespace for a in self.set_aside if a.item is None}
