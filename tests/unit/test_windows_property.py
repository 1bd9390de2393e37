"""Property tests: scheduled windows tile time, whatever the cron, zone, DST day or misses.

Runs go through the real runner and the in-memory ledger; beat's missed fires and failing
actions are drawn at random.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.schedule_ledger import InMemoryScheduleLedger
from worker.errors import ScheduleError
from worker.service.schedules import (
    ScheduleSpec,
    Window,
    is_tick,
    next_ticks,
    previous_tick,
    validate_cron,
)
from worker.service.tick import ActionReport, run_scheduled_tick

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]

#: 2024 UTC-offset changes of those zones: Berlin (CET/CEST), New York (EST/EDT) and Lord Howe
#: (half-hour DST), so start dates land just before a gap or a repeated hour.
TRANSITIONS = [
    datetime(2024, 3, 31, 1, tzinfo=UTC),
    datetime(2024, 10, 27, 1, tzinfo=UTC),
    datetime(2024, 3, 10, 7, tzinfo=UTC),
    datetime(2024, 11, 3, 6, tzinfo=UTC),
    datetime(2024, 4, 6, 15, tzinfo=UTC),
    datetime(2024, 10, 5, 15, 30, tzinfo=UTC),
]

#: (low, high) of each cron field: minute, hour, day of month, month, day of week.
FIELD_RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]

#: Ticks simulated per example: enough to cross a DST change with an hourly cron.
TICKS = 12


@st.composite
def cron_field(draw: st.DrawFn, low: int, high: int) -> str:
    def value() -> int:
        return draw(st.integers(low, high))

    kind = draw(st.sampled_from(["star", "step", "value", "range", "list", "range_step"]))
    if kind == "star":
        return "*"
    if kind == "step":
        return f"*/{draw(st.integers(1, max(1, (high - low) // 2)))}"
    if kind == "value":
        return str(value())
    a, b = sorted((value(), value()))
    if kind == "range":
        return f"{a}-{b}"
    if kind == "range_step":
        return f"{a}-{b}/{draw(st.integers(1, 5))}"
    return ",".join(
        str(v) for v in sorted(set(draw(st.lists(st.integers(low, high), min_size=1, max_size=4))))
    )


@st.composite
def cron_expression(draw: st.DrawFn) -> str:
    expression = " ".join(draw(cron_field(low, high)) for low, high in FIELD_RANGES)
    try:
        return validate_cron(expression)
    except ScheduleError:
        assume(False)  # e.g. "0 0 31 2 *": never fires
        raise


@st.composite
def start_instant(draw: st.DrawFn) -> datetime:
    if draw(st.booleans()):
        minutes_before = draw(st.integers(0, 3 * 24 * 60))
        return draw(st.sampled_from(TRANSITIONS)) - timedelta(minutes=minutes_before)
    return draw(st.datetimes(datetime(2020, 1, 1), datetime(2030, 1, 1), timezones=st.just(UTC)))


PROPERTY = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)


def simulate(
    cron: str, tz: str, ticks: list[datetime], missed: set[int], failed: set[int]
) -> list[Window]:
    """Fire ``ticks`` through the runner, skipping ``missed`` and failing ``failed`` (indexes)."""
    spec = ScheduleSpec(name="prop", cron=cron, timezone=tz, action="scan_sources")
    ledger = InMemoryScheduleLedger()
    windows: list[Window] = []

    def action(spec: ScheduleSpec, window: Window) -> ActionReport:
        windows.append(window)
        return ActionReport()

    def boom(spec: ScheduleSpec, window: Window) -> ActionReport:
        raise RuntimeError("drawn to fail")

    for index, tick in enumerate(ticks):
        if index in missed:
            continue
        if index in failed:
            try:
                run_scheduled_tick(spec, tick, ledger=ledger, action=boom, now=tick)
            except RuntimeError:
                continue
        run_scheduled_tick(spec, tick, ledger=ledger, action=action, now=tick)
    return windows


@PROPERTY
@given(
    cron=cron_expression(),
    tz=st.sampled_from(ZONES),
    start=start_instant(),
    missed=st.sets(st.integers(0, TICKS - 1)),
    failed=st.sets(st.integers(0, TICKS - 1)),
)
def test_successful_windows_tile_time_and_end_on_ticks(
    cron: str, tz: str, start: datetime, missed: set[int], failed: set[int]
) -> None:
    ticks = next_ticks(cron, tz, start, TICKS)
    assert all(a < b for a, b in itertools.pairwise(ticks))  # ordered, each fired once
    # ``failed`` ticks fail once and are not retried, like a task out of retries.
    windows = simulate(cron, tz, ticks, missed, failed - missed)
    for earlier, later in itertools.pairwise(windows):
        assert earlier.end == later.start  # no gap, no overlap
    for window in windows:
        assert window.start < window.end
        assert is_tick(cron, tz, window.end)


@PROPERTY
@given(cron=cron_expression(), tz=st.sampled_from(ZONES), start=start_instant())
def test_without_misses_each_window_is_one_cron_interval(
    cron: str, tz: str, start: datetime
) -> None:
    ticks = next_ticks(cron, tz, start, TICKS)
    windows = simulate(cron, tz, ticks, missed=set(), failed=set())
    assert windows[0].start == previous_tick(cron, tz, ticks[0] - timedelta(microseconds=1))
    assert [w.as_tuple() for w in windows[1:]] == list(itertools.pairwise(ticks))


@PROPERTY
@given(
    cron=cron_expression(),
    tz=st.sampled_from(ZONES),
    start=start_instant(),
    offset=st.integers(min_value=0),
)
def test_previous_tick_of_an_instant_between_two_ticks_is_the_earlier_one(
    cron: str, tz: str, start: datetime, offset: int
) -> None:
    earlier, later = next_ticks(cron, tz, start, 2)
    assert earlier < later
    span = (later - earlier) // timedelta(microseconds=1)
    between = earlier + timedelta(microseconds=offset % span)
    assert previous_tick(cron, tz, between) == earlier
