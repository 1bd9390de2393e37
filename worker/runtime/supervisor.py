"""Run child processes side by side and stop them together: the lanes of ``memworker worker``
and everything of ``memworker run``.

The supervisor forwards SIGINT/SIGTERM to every child (they sit in their own process groups,
so a terminal's Ctrl-C reaches them once, through here), reaps each one, and stops the others
when one exits on its own, so a half-running worker never looks healthy. Children are asked to
die with the supervisor (``PR_SET_PDEATHSIG``), so even a SIGKILLed supervisor leaves nothing
behind.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Final

from worker.runtime.lifetime import die_with_parent

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


@dataclass(frozen=True)
class Child:
    """One process to run: a name for logs, its command line and its environment."""

    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)


def supervise(
    children: Sequence[Child],
    *,
    on_exit: Callable[[int], None] = lambda _pid: None,
    on_poll: Callable[[], None] = lambda: None,
) -> int:
    """Run ``children`` until a signal or one of them exits; return the exit status.

    ``on_exit`` is called with each reaped child's pid (e.g. to mark it dead for metrics);
    ``on_poll`` at every look at the children (e.g. to watch the Redis they share).
    """
    stop: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        stop.append(signum)
        for proc in running:
            if proc.poll() is None:
                proc.send_signal(signum)

    running: list[subprocess.Popen[bytes]] = []
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        running.extend(_start(child) for child in children)
        status = _watch(children, running, stop, on_exit, on_poll)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_all(running, on_exit)
    return status


def _start(child: Child) -> subprocess.Popen[bytes]:
    parent = os.getpid()
    return subprocess.Popen(
        list(child.argv),
        env=dict(child.env),
        process_group=0,
        # Safe here: the only other thread a supervisor may have is the idle metrics server.
        preexec_fn=lambda: die_with_parent(signal.SIGTERM, parent=parent),  # noqa: PLW1509
    )


def _watch(
    children: Sequence[Child],
    running: list[subprocess.Popen[bytes]],
    stop: list[int],
    on_exit: Callable[[int], None],
    on_poll: Callable[[], None],
) -> int:
    """Wait for a signal (then for every child) or for one child to exit on its own."""
    while True:
        for child, proc in zip(children, running, strict=True):
            code = proc.poll()
            if code is None:
                continue
            on_exit(proc.pid)
            if stop:
                continue
            log.error("%s exited with status %s; stopping the others", child.name, code)
            stop.append(signal.SIGTERM)
            _signal_all(running, signal.SIGTERM)
            _wait_all(running, on_exit)
            return EXIT_CHILD_FAILED
        if stop:
            _wait_all(running, on_exit)
            return EXIT_INTERRUPTED if stop[0] == signal.SIGINT else 0
        on_poll()
        time.sleep(POLL_SECONDS)


def _signal_all(running: Sequence[subprocess.Popen[bytes]], signum: int) -> None:
    for proc in running:
        if proc.poll() is None:
            proc.send_signal(signum)


def _wait_all(running: Sequence[subprocess.Popen[bytes]], on_exit: Callable[[int], None]) -> None:
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for proc in running:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            log.warning(
                "pid %s did not stop within %.0f s; killing it", proc.pid, STOP_GRACE_SECONDS
            )
            proc.kill()
            proc.wait()
        on_exit(proc.pid)


def _stop_all(running: Sequence[subprocess.Popen[bytes]], on_exit: Callable[[int], None]) -> None:
    """Last resort on the way out (an error in the supervisor itself): nothing outlives it."""
    if any(proc.poll() is None for proc in running):
        _signal_all(running, signal.SIGTERM)
        _wait_all(running, on_exit)
