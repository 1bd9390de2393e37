"""Tie a child process's life to its parent's, so nothing outlives ``memworker run``.

Linux's ``PR_SET_PDEATHSIG`` asks the kernel to signal a process when its parent dies, even
when the parent is SIGKILLed and gets no chance to clean up. Elsewhere this is a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


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
