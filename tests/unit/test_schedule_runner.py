"""run_scheduled_tick over the in-memory ledger: once per tick, catch-up, failure and retry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.support.schedule_ledger import InMemoryScheduleLedger
from worker.service.schedules import ScheduleSpec, Window
from worker.service.tick import ActionReport, ScheduledAction, TickOutcome, run_scheduled_tick

HOURLY = ScheduleSpec(name="hourly", cron="0 * * * *", action="consolidate_pending")


def at(hour: int) -> datetime:
    return datetime(2024, 1, 1, hour, tzinfo=UTC)


class Recorder:
    """A real action that remembers the windows it was asked to cover."""

    def __init__(self) -> None:
        self.windows: list[Window] = []

    def __call__(self, spec: ScheduleSpec, window: Window) -> ActionReport:
        self.windows.append(window)
        return ActionReport({"windows": len(self.windows)})


class Boom(RuntimeError):
    pass


def failing(spec: ScheduleSpec, window: Window) -> ActionReport:
    raise Boom("source unreachable")


@pytest.fixture
def ledger() -> InMemoryScheduleLedger:
    return InMemoryScheduleLedger()


def run(
    ledger: InMemoryScheduleLedger,
    tick: datetime,
    action: ScheduledAction,
    spec: ScheduleSpec = HOURLY,
) -> TickOutcome:
    return run_scheduled_tick(spec, tick, ledger=ledger, action=action, now=tick)


def test_first_run_covers_one_cron_interval(ledger: InMemoryScheduleLedger) -> None:
    outcome = run(ledger, at(5), Recorder())
    assert (outcome.status, outcome.window) == ("ran", Window(at(4), at(5)))


def test_success_advances_the_watermark_to_the_tick(ledger: InMemoryScheduleLedger) -> None:
    run(ledger, at(5), Recorder())
    assert ledger.watermark("hourly") == at(5)


def test_the_action_report_is_returned(ledger: InMemoryScheduleLedger) -> None:
    assert run(ledger, at(5), Recorder()).report == ActionReport({"windows": 1})


def test_missed_ticks_are_caught_up_from_the_watermark(ledger: InMemoryScheduleLedger) -> None:
    action = Recorder()
    run(ledger, at(1), action)
    run(ledger, at(4), action)  # 02:00 and 03:00 never fired
    assert action.windows[-1] == Window(at(1), at(4))


def test_duplicate_fire_of_a_done_tick_does_not_run_the_action(
    ledger: InMemoryScheduleLedger,
) -> None:
    action = Recorder()
    run(ledger, at(5), action)
    assert run(ledger, at(5), action).status == "duplicate"
    assert len(action.windows) == 1


def test_duplicate_fire_of_a_running_tick_does_not_run_the_action(
    ledger: InMemoryScheduleLedger,
) -> None:
    ledger.try_start_tick("hourly", at(5), now=at(5))  # another worker is on it
    action = Recorder()
    assert run(ledger, at(5), action).status == "duplicate"
    assert action.windows == []


def test_a_failing_action_is_re_raised(ledger: InMemoryScheduleLedger) -> None:
    with pytest.raises(Boom):
        run(ledger, at(5), failing)


def test_a_failure_is_recorded_with_its_error_and_window(ledger: InMemoryScheduleLedger) -> None:
    with pytest.raises(Boom):
        run(ledger, at(5), failing)
    record = ledger.ticks[("hourly", at(5))]
    assert (record.state, record.error, record.window) == (
        "failed",
        "Boom: source unreachable",
        (at(4), at(5)),
    )


def test_a_failure_leaves_the_watermark_unchanged(ledger: InMemoryScheduleLedger) -> None:
    run(ledger, at(3), Recorder())
    with pytest.raises(Boom):
        run(ledger, at(4), failing)
    assert ledger.watermark("hourly") == at(3)


def test_a_failed_tick_can_be_retried(ledger: InMemoryScheduleLedger) -> None:
    with pytest.raises(Boom):
        run(ledger, at(5), failing)
    assert run(ledger, at(5), Recorder()).status == "ran"


def test_after_a_failure_the_next_tick_covers_the_failed_window(
    ledger: InMemoryScheduleLedger,
) -> None:
    action = Recorder()
    run(ledger, at(3), action)
    with pytest.raises(Boom):
        run(ledger, at(4), failing)
    run(ledger, at(5), action)
    assert action.windows[-1] == Window(at(3), at(5))


def test_a_tick_older_than_the_watermark_is_stale_and_skips_the_action(
    ledger: InMemoryScheduleLedger,
) -> None:
    action = Recorder()
    run(ledger, at(5), action)
    outcome = run(ledger, at(4), action)  # a delayed fire arriving after a later success
    assert outcome.status == "stale"
    assert len(action.windows) == 1


def test_a_stale_tick_never_moves_the_watermark_back(ledger: InMemoryScheduleLedger) -> None:
    run(ledger, at(5), Recorder())
    run(ledger, at(4), Recorder())
    assert ledger.watermark("hourly") == at(5)


def test_a_disabled_schedule_records_nothing(ledger: InMemoryScheduleLedger) -> None:
    spec = HOURLY.model_copy(update={"enabled": False})
    assert run(ledger, at(5), Recorder(), spec).status == "disabled"
    assert ledger.ticks == {}


def test_the_clock_gives_the_finish_time(ledger: InMemoryScheduleLedger) -> None:
    finished = at(5) + timedelta(seconds=42)
    run_scheduled_tick(
        HOURLY, at(5), ledger=ledger, action=Recorder(), now=at(5), clock=lambda: finished
    )
    record = ledger.ticks[("hourly", at(5))]
    assert (record.started_at, record.finished_at) == (at(5), finished)


def test_the_window_follows_the_schedule_time_zone(ledger: InMemoryScheduleLedger) -> None:
    spec = ScheduleSpec(
        name="kolkata", cron="0 9 * * *", timezone="Asia/Kolkata", action="scan_sources"
    )
    tick = datetime(2024, 1, 2, 3, 30, tzinfo=UTC)  # 09:00 IST
    outcome = run_scheduled_tick(spec, tick, ledger=ledger, action=Recorder(), now=tick)
    assert outcome.window == Window(tick - timedelta(days=1), tick)
