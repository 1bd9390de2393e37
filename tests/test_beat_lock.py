"""One beat per deployment: two real ``memworker beat`` processes, one schedules and the other
stands by; when the holder is SIGKILLed the standby takes over within the lock's lifetime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.support.waiting import wait_for
from worker.queue.beat_lock import BeatLock, beat_holder
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
def beats(settings: Settings, tmp_path: Path) -> Iterator[Callable[[str], subprocess.Popen[bytes]]]:
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

    def start(name: str) -> subprocess.Popen[bytes]:
        data = tmp_path / name  # each beat its own schedule file and heartbeat
        with (tmp_path / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "worker", "beat", "--loglevel", "DEBUG"],
                env=env | {"MEMWORKER_DATA_DIR": str(data)},
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
    beats: Callable[[str], subprocess.Popen[bytes]],
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
