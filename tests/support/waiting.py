"""Waiting on real processes: poll a condition until it holds, or fail naming what never came.

The only sleeping the tests do: polling stops as soon as the state is reached, and the bound
turns a hang into a failure instead of a stuck suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: How often a condition is looked at.
POLL_SECONDS = 0.1
#: Default bound: generous for a loaded two-core machine starting several processes.
DEFAULT_BOUND_SECONDS = 120.0


def wait_for(predicate: Callable[[], T], what: str, bound: float = DEFAULT_BOUND_SECONDS) -> T:
    """The first truthy value of ``predicate()``; AssertionError after ``bound`` seconds."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(POLL_SECONDS)
    raise AssertionError(f"timed out after {bound:g} s waiting for {what}")
