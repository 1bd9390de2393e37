"""Celery beat glue: cron due-ness, the tick carried by each fire, the heartbeat.

Schedules are checked against a real Celery app with an injected clock; the tick injection is
checked end to end by letting the scheduler publish to the real Redis broker and reading the
message back with kombu.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
import time_machine
from celery import Celery
from celery.beat import ScheduleEntry
from kombu.connection import Connection

from worker.errors import ScheduleError
from worker.runtime.beat import (
    CronTickSchedule,
    MemworkerScheduler,
    beat_schedule_for,
    format_tick,
    parse_tick,
    with_tick,
)
from worker.service.schedules import HEARTBEAT_INTERVAL_SECONDS, ScheduleSpec, heartbeat_age
from worker.types import SCHEDULED_RUN_TASK

#: Bound on waiting for the published message; it is there at once, this only ends a hang.
RECEIVE_TIMEOUT_SECONDS = 5.0

SIX_HOURLY = ScheduleSpec(name="six-hourly", cron="0 */6 * * *", action="consolidate_pending")


class Clock:
    """A settable clock for ``nowfun``."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2024, 1, 1, hour, minute, second, tzinfo=UTC)


@pytest.fixture
def app() -> Iterator[Celery]:
    # No broker is contacted by these tests; the URL only has to parse.
    celery = Celery("beat-test", broker="memory://", set_as_current=False)
    celery.conf.update(timezone="UTC", enable_utc=True)
    yield celery
    celery.close()


def schedule(
    app: Celery, clock: Clock, cron: str = "0 */6 * * *", tz: str = "UTC"
) -> CronTickSchedule:
    return CronTickSchedule(cron, tz, nowfun=clock, app=app)


def test_not_due_again_before_the_next_tick(app: Celery) -> None:
    clock = Clock(at(7))
    state = schedule(app, clock).is_due(last_run_at=at(6, 0, 1))
    assert (state.is_due, state.next) == (False, 5 * 3600)


def test_due_once_a_tick_has_passed_since_the_last_run(app: Celery) -> None:
    clock = Clock(at(12, 0, 2))
    state = schedule(app, clock).is_due(last_run_at=at(6, 0, 1))
    assert (state.is_due, state.next) == (True, 6 * 3600 - 2)


def test_due_only_once_after_several_missed_ticks(app: Celery) -> None:
    cron = schedule(app, Clock(at(19)))
    assert cron.is_due(last_run_at=at(1)).is_due
    assert not cron.is_due(last_run_at=at(19)).is_due


def test_naive_last_run_at_is_read_as_utc(app: Celery) -> None:
    state = schedule(app, Clock(at(7))).is_due(last_run_at=datetime(2024, 1, 1, 5, 59))
    assert state.is_due


def test_due_tick_follows_the_schedule_time_zone(app: Celery) -> None:
    cron = schedule(app, Clock(at(0)), cron="0 9 * * *", tz="Asia/Kolkata")
    assert cron.due_tick(at(4)) == at(3, 30)


def test_remaining_estimate_counts_down_to_the_next_tick(app: Celery) -> None:
    assert schedule(app, Clock(at(7))).remaining_estimate(at(6, 0, 1)) == timedelta(hours=5)


def test_schedules_with_different_crons_are_not_equal(app: Celery) -> None:
    clock = Clock(at(0))
    assert schedule(app, clock, "0 */6 * * *") != schedule(app, clock, "0 */4 * * *")


def test_beat_schedule_routes_each_enabled_spec_to_the_scheduled_run_task() -> None:
    entries = beat_schedule_for([SIX_HOURLY], queue="mw.sweep")
    assert entries == {
        "six-hourly": {
            "task": SCHEDULED_RUN_TASK,
            "schedule": CronTickSchedule("0 */6 * * *", "UTC"),
            "args": ("six-hourly",),
            "options": {"queue": "mw.sweep"},
        }
    }


def test_beat_schedule_leaves_out_disabled_specs() -> None:
    disabled = SIX_HOURLY.model_copy(update={"enabled": False})
    assert beat_schedule_for([disabled], queue="mw.sweep") == {}


def test_with_tick_adds_the_due_tick_as_iso_utc(app: Celery) -> None:
    entry = ScheduleEntry(
        name="six-hourly", task=SCHEDULED_RUN_TASK, schedule=schedule(app, Clock(at(12, 0, 3))),
        args=("six-hourly",), kwargs={"extra": 1}, app=app,
    )  # fmt: skip
    assert with_tick(entry).kwargs == {"extra": 1, "tick": "2024-01-01T12:00:00+00:00"}


def test_with_tick_leaves_the_scheduler_entry_unchanged(app: Celery) -> None:
    cron = schedule(app, Clock(at(12, 0, 3)))
    entry = ScheduleEntry(name="e", task=SCHEDULED_RUN_TASK, schedule=cron, app=app)
    with_tick(entry)
    assert (entry.kwargs, entry.schedule.app) == ({}, app)


def test_with_tick_leaves_interval_entries_alone(app: Celery) -> None:
    entry = ScheduleEntry(name="sweep", task="memworker.sweep", schedule=2.0, app=app)
    assert with_tick(entry) is entry


def test_tick_wire_format_round_trips() -> None:
    tick = datetime(2024, 3, 31, 1, tzinfo=UTC)
    assert parse_tick(format_tick(tick)) == tick


def test_parse_tick_refuses_a_tick_without_offset() -> None:
    with pytest.raises(ScheduleError, match="no UTC offset"):
        parse_tick("2024-01-01T06:00:00")


def test_scheduler_loop_writes_the_heartbeat(app: Celery, tmp_path: Path) -> None:
    path = tmp_path / "beat.heartbeat"
    scheduler = MemworkerScheduler(app, heartbeat_path=path, lazy=True)
    with time_machine.travel(at(9, 30), tick=False):
        scheduler.tick()
        assert heartbeat_age(path, at(9, 30, 5)) == timedelta(seconds=5)


def test_heartbeat_path_can_come_from_the_app_configuration(app: Celery, tmp_path: Path) -> None:
    app.conf.memworker_beat_heartbeat = str(tmp_path / "hb")
    assert MemworkerScheduler(app, lazy=True).heartbeat_path == tmp_path / "hb"


def test_scheduler_sleeps_no_longer_than_the_heartbeat_interval(app: Celery) -> None:
    assert MemworkerScheduler(app, max_interval=300, lazy=True).max_interval == (
        HEARTBEAT_INTERVAL_SECONDS
    )


# --- end to end through the real broker -------------------------------------------------------


@pytest.fixture
def queue_name(key_prefix: str, redis_url: str) -> Iterator[str]:
    """A queue of this test's own, so no other test's worker consumes the message."""
    name = f"{key_prefix}.sweep"
    yield name
    client = redis.Redis.from_url(redis_url)
    with contextlib.suppress(redis.RedisError):
        client.delete(name, f"_kombu.binding.{name}")
    client.close()


def test_a_fired_entry_is_published_with_its_tick(redis_url: str, queue_name: str) -> None:
    clock = Clock(at(11, 59))
    app = Celery("beat-broker-test", broker=redis_url, set_as_current=False)
    entries = beat_schedule_for([SIX_HOURLY], queue=queue_name)
    entries["six-hourly"]["schedule"] = schedule(app, clock)
    app.conf.update(timezone="UTC", enable_utc=True, beat_schedule=entries)
    scheduler = MemworkerScheduler(app)
    try:
        clock.now = at(12, 0, 4)  # the 12:00 tick passes while beat runs
        scheduler.tick()
        with Connection(redis_url) as connection:  # type: ignore[no-untyped-call]
            queue = connection.SimpleQueue(queue_name)
            message = queue.get(timeout=RECEIVE_TIMEOUT_SECONDS)
            message.ack()
            queue.close()
        args, kwargs, _ = message.decode()
        assert message.headers["task"] == SCHEDULED_RUN_TASK
        assert (args, kwargs) == (["six-hourly"], {"tick": "2024-01-01T12:00:00+00:00"})
    finally:
        scheduler.close()
        app.close()
