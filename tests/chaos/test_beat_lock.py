"""One beat per deployment: two real ``memworker beat`` processes, one schedules and the other
stands by; when the holder is SIGKILLed the standby takes over within the lock's lifetime."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.support.waiting import wait_for
from worker.queue.deployment import BeatLock, beat_holder, lock_key, pid_namespace
from worker.service.schedules import HEARTBEAT_FILENAME
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

#: Short, so a failover takes seconds; a standby looks at the lock three times per lifetime.
LOCK_SECONDS = 3.0


def test_only_one_process_holds_the_lock_until_it_lets_go(
    redis_client: redis.Redis, settings: Settings
) -> None:
    first = BeatLock(redis_client, settings.key_prefix, ttl_seconds=LOCK_SECONDS)
    second = BeatLock(redis_client, settings.key_prefix, ttl_seconds=LOCK_SECONDS)

    held = (first.hold(), second.hold(), first.hold())
    first.release()

    assert held == (True, False, True)
    assert second.hold()
    assert beat_holder(redis_client, settings.key_prefix) == second.token


@pytest.fixture
def beats(settings: Settings, tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")} | {
        "MEMWORKER_REDIS_URL": str(settings.redis_url),
        "MEMWORKER_KEY_PREFIX": settings.key_prefix,
        "MEMWORKER_DATABASE_URL": str(settings.database_url),
        "MEMWORKER_SWEEP_INTERVAL_SECONDS": "0.5",
        "MEMWORKER_BEAT_LOCK_SECONDS": str(LOCK_SECONDS),
    }
    if settings.broker_url:
        env["MEMWORKER_BROKER_URL"] = settings.broker_url

    def start(name: str, **more: str) -> subprocess.Popen[bytes]:
        data = tmp_path / name  # each beat its own schedule file and heartbeat
        with (tmp_path / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "worker", "beat", "--loglevel", "DEBUG"],
                env=env | {"MEMWORKER_DATA_DIR": str(data)} | more,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def holder_pid(client: redis.Redis, prefix: str) -> int | None:
    holder = beat_holder(client, prefix)
    return int(holder.split(":")[1]) if holder else None


def sends(log: Path) -> int:
    return log.read_text(errors="replace").count("Sending due task memworker.sweep")


def test_a_second_beat_stands_by_and_takes_over_when_the_first_is_killed(
    beats: Callable[..., subprocess.Popen[bytes]],
    redis_client: redis.Redis,
    settings: Settings,
    tmp_path: Path,
) -> None:
    prefix = settings.key_prefix
    first = beats("first")
    wait_for(lambda: holder_pid(redis_client, prefix) == first.pid, "the first beat's lock")
    second = beats("second")
    wait_for(lambda: "standing by" in (tmp_path / "second.log").read_text(), "a standby")
    wait_for(lambda: sends(tmp_path / "first.log") >= 4, "the first beat to schedule sweeps")

    assert sends(tmp_path / "second.log") == 0  # the standby schedules nothing
    first.send_signal(signal.SIGKILL)
    first.wait()
    wait_for(lambda: holder_pid(redis_client, prefix) == second.pid, "the standby to take over")
    wait_for(lambda: sends(tmp_path / "second.log") >= 1, "the new holder to schedule")


#: Far longer than any wait below: a takeover within it cannot be the lock expiring.
LONG_LOCK_SECONDS = 600.0


def _dead_pid() -> int:
    """The pid of a process that ran on this host and has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _token_here(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:deadbeef:{pid_namespace()}"


def test_a_lock_left_by_a_dead_beat_on_this_host_is_taken_over_at_once(
    redis_client: redis.Redis, settings: Settings
) -> None:
    dead = _dead_pid()
    redis_client.set(lock_key(settings.key_prefix), _token_here(dead), px=600_000)
    lock = BeatLock(redis_client, settings.key_prefix, ttl_seconds=LONG_LOCK_SECONDS)

    assert lock.hold()
    assert lock.took_over is not None
    assert lock.took_over.pid == dead
    assert beat_holder(redis_client, settings.key_prefix) == lock.token


def test_a_lock_held_by_a_live_beat_on_this_host_is_left_alone(
    redis_client: redis.Redis, settings: Settings
) -> None:
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        redis_client.set(lock_key(settings.key_prefix), _token_here(alive.pid), px=600_000)
        lock = BeatLock(redis_client, settings.key_prefix)

        assert not lock.hold()
        assert lock.holder is not None
        assert lock.holder.pid == alive.pid
    finally:
        alive.kill()
        alive.wait()


def test_a_lock_held_on_another_host_waits_for_its_expiry(
    redis_client: redis.Redis, settings: Settings
) -> None:
    token = f"elsewhere:{_dead_pid()}:deadbeef:{pid_namespace()}"
    redis_client.set(lock_key(settings.key_prefix), token, px=600_000)
    lock = BeatLock(redis_client, settings.key_prefix)

    assert not lock.hold()
    assert lock.holder is not None
    assert lock.holder.host == "elsewhere"


def test_a_killed_beats_successor_on_the_same_host_takes_over_at_once_and_says_so(
    beats: Callable[..., subprocess.Popen[bytes]],
    redis_client: redis.Redis,
    settings: Settings,
    tmp_path: Path,
) -> None:
    prefix, long_lock = settings.key_prefix, {"MEMWORKER_BEAT_LOCK_SECONDS": str(LONG_LOCK_SECONDS)}
    first = beats("first", **long_lock)
    wait_for(lambda: holder_pid(redis_client, prefix) == first.pid, "the first beat's lock")
    first.send_signal(signal.SIGKILL)
    first.wait()

    second = beats("second", **long_lock)

    wait_for(lambda: holder_pid(redis_client, prefix) == second.pid, "the successor's lock")
    log = (tmp_path / "second.log").read_text()
    assert f"the beat on {socket.gethostname()} (pid {first.pid}) died holding" in log
    assert "standing by" not in log
    wait_for(lambda: sends(tmp_path / "second.log") >= 1, "the successor to schedule")


def test_a_beat_without_redis_says_redis_is_unreachable_once_not_that_a_beat_holds_the_lock(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")} | {
        "MEMWORKER_REDIS_URL": "redis://127.0.0.1:1/0",
        "MEMWORKER_DATA_DIR": str(tmp_path),
        "MEMWORKER_BEAT_LOCK_SECONDS": "3",
        # The log is read after a SIGKILL: nothing may wait in a buffer.
        "PYTHONUNBUFFERED": "1",
    }
    log = tmp_path / "beat.log"
    with log.open("wb") as out:
        beat = subprocess.Popen(
            [sys.executable, "-m", "worker", "beat", "--supervised", "--loglevel", "INFO"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    heartbeats: set[str] = set()

    def loops(count: int) -> bool:
        with contextlib.suppress(OSError):
            heartbeats.add((tmp_path / HEARTBEAT_FILENAME).read_text())
        return len(heartbeats) >= count

    try:
        wait_for(lambda: loops(4), "four loops of the beat")
    finally:
        beat.kill()
        beat.wait()
    text = log.read_text()

    assert text.count("beat: Redis is unreachable") == 1, text
    assert "holds the deployment's beat lock" not in text
