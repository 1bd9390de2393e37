"""Run child processes side by side and stop them together: the lanes of ``memworker worker``
and everything of ``memworker run``.

The supervisor forwards SIGINT/SIGTERM to every child (they sit in their own process groups,
so a terminal's Ctrl-C reaches them once, through here), reaps each one, and stops the others
when one exits on its own, so a half-running worker never looks healthy.

Children end whatever state they are in (:mod:`worker.runtime.lifetime`):

- on a normal stop, a child that has not exited ``grace_seconds`` after SIGTERM (one that
  ignores it, or hangs in its shutdown) is SIGKILLed with its whole process group, and so is
  anything left in a reaped child's group;
- when the supervisor itself dies, even by SIGKILL, the kernel SIGKILLs each child
  (``PR_SET_PDEATHSIG``: once the supervisor is gone nobody could escalate a SIGTERM), and a
  watchdog in each ``python -m worker`` child (:data:`SUPERVISOR_PID_ENV`) ends it and its
  group where that is not available. A lane killed mid-merge loses nothing: its lease expires
  and the batch, still pending, is merged again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Final

from worker.runtime.lifetime import SUPERVISOR_PID_ENV, die_with_parent

log = logging.getLogger(__name__)

#: How often the supervisor looks at its children. Short, so a dead lane is noticed within it.
POLL_SECONDS: Final = 0.2
#: After a stop was asked, how long children get before they are killed: Celery's own soft
#: shutdown (10 s for merges to commit) plus time to close connections.
STOP_GRACE_SECONDS: Final = 30.0
#: Exit status after a Ctrl-C, as shells report it (128 + SIGINT).
EXIT_INTERRUPTED: Final = 130
#: Exit status when a child exited on its own (crashed, or refused to start).
EXIT_CHILD_FAILED: Final = 1
#: The signals that stop a supervisor and, through it, every child.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class StartupInterrupted(KeyboardInterrupt):
    """The Ctrl-C that stops a supervising command's start-up, raised in the step under way.

    Caught wherever a ``KeyboardInterrupt`` is (Typer turns it into exit status 130). It has a
    type of its own because CPython 3.11 remembers a plain ``KeyboardInterrupt`` that passes
    through code run from a string (``exec``/``eval`` of source text, as ``namedtuple``,
    ``dataclasses`` and SQLAlchemy do while they build classes): ``python -m`` then ends the
    process by SIGINT after it exited 130, with no traceback. The check compares the exact
    type, so a subclass is never remembered.
    """


@dataclass(frozen=True)
class Child:
    """One process to run: a name for logs, its command line and its environment."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)


class StopSignals:
    """SIGINT and SIGTERM, caught from the moment a supervising command starts until it ends.

    Entered before anything is started (the embedded Redis, the start-up checks), so a signal
    that arrives during start-up is never lost: it is recorded, and a SIGINT also interrupts
    the step under way. Library code that swallows the ``KeyboardInterrupt`` cannot undo the
    record: :func:`supervise` then starts no child and returns at once. Once children run,
    every signal is forwarded to each of them instead.

    >>> with StopSignals() as signals:
    ...     signals.received
    []
    """

    def __init__(self) -> None:
        self.received: list[int] = []
        #: Started children, in order; the handler forwards to them.
        self.children: list[subprocess.Popen[bytes]] = []
        self._told: set[tuple[int, int]] = set()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def tell(self, proc: subprocess.Popen[bytes]) -> None:
        """Forward every signal received so far that ``proc`` has not been sent (a child that
        was being started when one arrived)."""
        for signum in dict.fromkeys(self.received):
            if (proc.pid, signum) not in self._told and proc.poll() is None:
                self._told.add((proc.pid, signum))
                proc.send_signal(signum)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.children:
            for proc in self.children:
                self.tell(proc)
        elif signum == signal.SIGINT:
            raise StartupInterrupted  # start-up: stop the step under way (the record stays)


def supervise(
    children: Sequence[Child],
    *,
    on_exit: Callable[[int], None] = lambda _pid: None,
    grace_seconds: float = STOP_GRACE_SECONDS,
    on_poll: Callable[[], None] = lambda: None,
    signals: StopSignals | None = None,
) -> int:
    """Run ``children`` until a signal or one of them exits; return the exit status.

    ``on_exit`` is called with each reaped child's pid (e.g. to mark it dead for metrics);
    ``on_poll`` at every look at the children (e.g. to watch the Redis they share).
    ``grace_seconds``: how long a stopping child gets before it and its group are killed.
    ``signals``: the command's :class:`StopSignals`, entered before its start-up; a stop it
    already received means no child is started. Without it, signals are caught from here on.
    """
    with contextlib.ExitStack() as stack:
        caught = signals or stack.enter_context(StopSignals())
        running = caught.children
        stopping = _Stopping(on_exit, grace_seconds)
        try:
            for child in children:
                if caught.received:
                    break
                running.append(_start(child))
                caught.tell(running[-1])  # a signal that came while it started
            return _watch(children, running, caught.received, stopping, on_poll)
        finally:
            _stop_all(running, stopping)


def _start(child: Child) -> subprocess.Popen[bytes]:
    parent = os.getpid()
    return subprocess.Popen(
        list(child.argv),
        env={**child.env, SUPERVISOR_PID_ENV: str(parent)},
        process_group=0,
        # Safe here: the only other thread a supervisor may have is the idle metrics server.
        # SIGKILL: an orphan that ignores SIGTERM would have no one left to escalate.
        preexec_fn=lambda: die_with_parent(signal.SIGKILL, parent=parent),  # noqa: PLW1509
    )


def _watch(
    children: Sequence[Child],
    running: list[subprocess.Popen[bytes]],
    stop: list[int],
    stopping: _Stopping,
    on_poll: Callable[[], None],
) -> int:
    """Wait for a signal (then for every child) or for one child to exit on its own."""
    while True:
        for child, proc in zip(children, running, strict=False):  # fewer when a stop came first
            code = proc.poll()
            if code is None:
                continue
            stopping.reaped(proc)
            if stop:
                continue
            log.error("%s exited with status %s; stopping the others", child.name, code)
            stop.append(signal.SIGTERM)
            _signal_all(running, signal.SIGTERM)
            stopping.wait_all(running)
            return EXIT_CHILD_FAILED
        if stop:
            stopping.wait_all(running)
            return EXIT_INTERRUPTED if stop[0] == signal.SIGINT else 0
        on_poll()
        time.sleep(POLL_SECONDS)


def _signal_all(running: Sequence[subprocess.Popen[bytes]], signum: int) -> None:
    for proc in running:
        if proc.poll() is None:
            proc.send_signal(signum)


@dataclass
class _Stopping:
    """Reaps stopping children within one grace period, killing what outlives it."""

    on_exit: Callable[[int], None]
    grace_seconds: float

    def wait_all(self, running: Sequence[subprocess.Popen[bytes]]) -> None:
        deadline = time.monotonic() + self.grace_seconds
        for proc in running:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                log.warning(
                    "pid %s did not stop within %.0f s; killing it", proc.pid, self.grace_seconds
                )
                _kill_group(proc.pid)
                proc.kill()
                proc.wait()
            self.reaped(proc)

    def reaped(self, proc: subprocess.Popen[bytes]) -> None:
        """After a child exited: nothing of its process group may stay behind either."""
        _kill_group(proc.pid)
        self.on_exit(proc.pid)


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group a child led (its own children), if any of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _stop_all(running: Sequence[subprocess.Popen[bytes]], stopping: _Stopping) -> None:
    """Last resort on the way out (an error in the supervisor itself): nothing outlives it."""
    if any(proc.poll() is None for proc in running):
        _signal_all(running, signal.SIGTERM)
        stopping.wait_all(running)
