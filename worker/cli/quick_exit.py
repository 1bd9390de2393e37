"""Ending the ``memworker`` process as soon as its command is done.

When a script ends, CPython tears down every module it imported and collects what is left
before the process exits. With the libraries an operator command loads (SQLAlchemy, redis-py,
pydantic, Typer, Rich) that teardown is a fifth to a third of a short command's wall time
(``memworker status``: 0.15–0.25 s of 0.8 s on a 2-core machine), and no command needs it: its
output is written, its connections are closed by the operating system either way.

So the console script ends the process itself once the command has returned
(:func:`end_process`): it runs the :mod:`atexit` handlers as the interpreter would (logging's
flush, finalisers such as a temporary directory's removal, an embedded Redis's stop), flushes
standard output and error, and leaves with ``os._exit`` and the command's status. Services
that fork many workers use the same move to skip the final collection.

What it keeps from CPython's own ending:

- a live non-daemon thread is waited for: then the interpreter ends as usual, since it joins
  such threads before anything else;
- the status a ``SystemExit`` carries: ``None`` is 0, an integer is itself, anything else is
  printed to standard error and gives 1;
- a standard stream that cannot be flushed (its reader gone) ends the process with status
  120, CPython's status for the same failure; a stream already closed is left alone.

Only the console script (and ``python -m worker``) ends this way: :func:`worker.cli.app.main`
still raises ``SystemExit``, so code that runs it in-process keeps control.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Final, NoReturn

#: CPython's exit status when flushing standard output or error fails at exit.
FLUSH_FAILED_STATUS: Final = 120


def exit_status(code: object) -> int:
    """The process status of ``SystemExit(code)``, as CPython computes it (a non-integer is
    printed to standard error first).

    >>> exit_status(None), exit_status(3), exit_status(True)
    (0, 3, 1)
    """
    if code is None:
        return 0
    if isinstance(code, int):
        return int(code)
    print(code, file=sys.stderr)
    return 1


def other_threads_alive() -> bool:
    """Whether a thread the interpreter would wait for at exit is still running.

    >>> go = threading.Event()
    >>> waiting = threading.Thread(target=go.wait)
    >>> waiting.start()
    >>> other_threads_alive()
    True
    >>> go.set()
    >>> waiting.join()
    """
    main = threading.main_thread()
    return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())


def end_process(code: object) -> NoReturn:
    """End the process with ``SystemExit(code)``'s status, skipping the interpreter's teardown
    (module notes); when a non-daemon thread still runs, raise that ``SystemExit`` instead."""
    status = exit_status(code)
    if other_threads_alive():
        raise SystemExit(status)
    atexit._run_exitfuncs()
    os._exit(_flushed(status))


def _flushed(status: int) -> int:
    """Flush standard output and error; ``status``, or 120 when either could not be flushed
    (CPython skips a closed stream and gives 120 for a failed flush, whatever the status)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None or stream.closed:
            continue
        try:
            stream.flush()
        except OSError:  # e.g. the reader of a pipe is gone
            status = FLUSH_FAILED_STATUS
    return status
