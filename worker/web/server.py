"""Serving the console: uvicorn on loopback, one process, until interrupted.

The console binds 127.0.0.1 only: it is an operator's window, reached on the host or through
an SSH tunnel, never exposed. :func:`start` runs it in a thread of the calling process (the
tests, and anything embedding it) and says which port it got; :func:`serve` runs it in the
foreground for ``memworker console``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import uvicorn

from worker.errors import ConfigurationError
from worker.web.app import build_app

if TYPE_CHECKING:
    from worker.runtime.container import Runtime

#: The only address the console listens on.
HOST: Final = "127.0.0.1"
#: The default port of ``memworker console``.
DEFAULT_PORT: Final = 8377
#: Bounds the wait for a started server to listen (it normally takes milliseconds).
START_DEADLINE_SECONDS: Final = 10.0


def credentials(runtime: Runtime) -> tuple[str, str]:
    """The console's user and password from the settings; refuses to go on without a
    password (:class:`ConfigurationError`), so the console is never served open."""
    secret = runtime.settings.console_password
    password = secret.get_secret_value() if secret is not None else ""
    if not password:
        raise ConfigurationError(
            "the console needs a password: set MEMWORKER_CONSOLE_PASSWORD (and "
            "MEMWORKER_CONSOLE_USER, default admin); it serves nothing without one"
        )
    return runtime.settings.console_user, password


def _config(runtime: Runtime, port: int) -> uvicorn.Config:
    user, password = credentials(runtime)
    return uvicorn.Config(
        build_app(runtime, user=user, password=password),
        host=HOST,
        port=port,
        log_level="warning",
        access_log=False,
        server_header=False,
        proxy_headers=False,
        lifespan="off",
    )


def serve(runtime: Runtime, *, port: int = DEFAULT_PORT) -> None:
    """Serve the console in the foreground until interrupted (Ctrl-C)."""
    uvicorn.Server(_config(runtime, port)).run()


@dataclass(frozen=True)
class Started:
    """A console serving in a thread: its base URL."""

    url: str


class _Server(uvicorn.Server):
    """A uvicorn server that says when it listens, or has given up (its ``settled`` event)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.settled = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets)
        finally:
            self.settled.set()

    def run_settled(self) -> None:
        try:
            self.run()
        finally:
            self.settled.set()  # it could not start (a port in use): stop waiting for it


@contextmanager
def start(runtime: Runtime, *, port: int = 0) -> Iterator[Started]:
    """Serve the console in a thread (``port=0``: any free port) until the block ends."""
    server = _Server(_config(runtime, port))
    thread = threading.Thread(target=server.run_settled, name="memworker-console", daemon=True)
    thread.start()
    if not server.settled.wait(START_DEADLINE_SECONDS) or not server.started:
        server.should_exit = True
        raise ConfigurationError(f"the console could not listen on {HOST}:{port}")
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Started(url=f"http://{HOST}:{bound}")
    finally:
        server.should_exit = True
        thread.join(timeout=START_DEADLINE_SECONDS)
