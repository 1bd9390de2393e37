"""Tie a child process's life to its parent's, so nothing outlives ``memworker run``.

Two mechanisms, because a child must end *whatever state it is in* once its supervisor is
gone (a Celery lane stuck in a warm shutdown against a dead broker ignores SIGTERM):

- :func:`die_with_parent`: Linux's ``PR_SET_PDEATHSIG`` asks the kernel to signal a process
  when its parent dies, even when the parent is SIGKILLed and gets no chance to clean up. The
  supervisor asks for SIGKILL, which no state can ignore. Elsewhere this is a no-op.
- :func:`watch_parent`: a watchdog thread in the child that polls its parent pid; once the
  parent is gone it sends SIGTERM to the child (a chance to finish), and SIGKILL to the
  child's whole process group after a grace period. It covers systems without
  ``PR_SET_PDEATHSIG`` and a request that failed. A supervisor names itself to its children in
  :data:`SUPERVISOR_PID_ENV`; ``python -m worker`` starts the watchdog from it
  (:func:`watch_supervisor_from_env`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from typing import Final

_PR_SET_PDEATHSIG = 1

#: Set by the supervisor in each child's environment: its own pid.
SUPERVISOR_PID_ENV: Final = "MEMWORKER_SUPERVISOR_PID"
#: How often the watchdog looks at its parent: a second is soon enough for an orphan (the
#: kernel's PDEATHSIG acts at once where it exists) and costs nothing.
WATCH_POLL_SECONDS: Final = 1.0
#: After the parent is gone, how long the child gets between SIGTERM and SIGKILL: Celery's soft
#: shutdown (10 s for a merge to commit) plus a little.
ORPHAN_GRACE_SECONDS: Final = 15.0


def die_with_parent(sig: signal.Signals = signal.SIGKILL, *, parent: int | None = None) -> None:
    """Have the kernel send ``sig`` to this process when its parent exits.

    ``parent`` is the pid the caller expects as parent: if it already died before the request
    was made (a race at start-up), the signal is raised at once.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig))
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)


def watch_parent(
    parent: int,
    *,
    grace_seconds: float = ORPHAN_GRACE_SECONDS,
    poll_seconds: float = WATCH_POLL_SECONDS,
) -> threading.Thread:
    """Start a daemon thread that ends this process (and its group, when it leads one) once
    ``parent`` is no longer its parent: SIGTERM, then SIGKILL after ``grace_seconds``."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        _end_orphan(grace_seconds, poll_seconds)

    thread = threading.Thread(target=watch, name="memworker-parent-watchdog", daemon=True)
    thread.start()
    return thread


#: The supervisor this process is a direct child of (see :func:`watch_supervisor_from_env`).
_supervisor: list[int] = []


def watch_supervisor_from_env() -> threading.Thread | None:
    """:func:`watch_parent` of the supervisor named in :data:`SUPERVISOR_PID_ENV`, when this
    process is its direct child; the variable is removed so no grandchild watches a pid that
    is not its parent."""
    named = os.environ.pop(SUPERVISOR_PID_ENV, "")
    if not named.isdigit() or int(named) != os.getppid():
        return None
    _supervisor[:] = [int(named)]
    return watch_parent(int(named))


def supervisor_pid() -> int | None:
    """The pid of the supervisor watching this process, or None when none is (a process
    started by hand, even with ``--supervised``).

    >>> supervisor_pid() is None
    True
    """
    return _supervisor[0] if _supervisor else None


def _end_orphan(grace_seconds: float, poll_seconds: float) -> None:
    """SIGTERM this process; whatever still runs after the grace period is SIGKILLed."""
    me = os.getpid()
    os.kill(me, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        time.sleep(min(poll_seconds, max(deadline - time.monotonic(), 0.0)))
    if os.getpgrp() == me:  # a supervisor's child leads its own group: take its children too
        os.killpg(me, signal.SIGKILL)
    os.kill(me, signal.SIGKILL)
