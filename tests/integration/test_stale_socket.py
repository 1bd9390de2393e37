"""A socket left behind by a killed ``memworker run`` is recognised at once, and cleaned up.

After ``kill -9`` of ``memworker run`` nothing removes ``<data dir>/redis.sock``. Connecting to
it is refused by the kernel immediately, so a client or a command says "stale socket" in
milliseconds (before, a PING with retries and backoff took 4–7.5 s to fail), and the next
``memworker run`` removes it, saying so, and starts its server there.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from pathlib import Path
from typing import Final

import pytest
import redis
from typer.testing import CliRunner

from worker import MemoryClient, QueueUnavailable
from worker.cli.app import app
from worker.queue.redis import SocketState, probe_socket
from worker.runtime.processes import embedded_redis
from worker.settings import Settings

#: "Milliseconds": generous for a loaded CI machine, far below the seconds of a retried PING.
FAST_SECONDS: Final = 0.25


def _stale_socket(data_dir: Path) -> Path:
    """``<data_dir>/redis.sock`` as a killed server leaves it: a socket file, no listener."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "redis.sock"
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as sock:
        sock.bind(str(path))
    return path


def test_a_socket_nobody_listens_on_is_probed_as_stale(tmp_path: Path) -> None:
    path = _stale_socket(tmp_path)

    assert probe_socket(path) is SocketState.STALE


def test_a_client_facing_a_stale_socket_says_so_within_milliseconds(tmp_path: Path) -> None:
    _stale_socket(tmp_path)
    started = time.monotonic()

    with pytest.raises(QueueUnavailable, match=r"redis.sock is a stale socket.*memworker run"):
        MemoryClient(Settings(redis_url=None, data_dir=tmp_path))

    assert time.monotonic() - started < FAST_SECONDS


def test_a_command_facing_a_stale_socket_says_so_within_milliseconds(tmp_path: Path) -> None:
    _stale_socket(tmp_path)
    env = {"MEMWORKER_DATA_DIR": str(tmp_path), "MEMWORKER_REDIS_URL": ""}
    started = time.monotonic()

    result = CliRunner().invoke(app, ["enqueue", "--user", "u1", "I prefer tea"], env=env)

    assert time.monotonic() - started < FAST_SECONDS * 4  # includes the command's own start
    assert result.exit_code != 0
    assert "stale socket" in result.output


def test_memworker_run_removes_a_stale_socket_on_start_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _stale_socket(tmp_path)

    with caplog.at_level(logging.WARNING), embedded_redis(tmp_path, appendonly=False) as url:
        client = redis.Redis.from_url(url)
        try:
            answered = client.ping()
        finally:
            client.close()

    assert answered is True
    assert f"removed the stale socket {path}" in caplog.text
    assert not path.exists()  # and the server removed its own socket when it stopped
