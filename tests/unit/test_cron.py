"""Cron ticks and lookback windows: UTC results, schedule time zones, DST days, validation."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from worker.errors import ScheduleError
from worker.service.schedules import (
    Window,
    is_tick,
    lookback_window,
    missed_ticks,
    next_ticks,
    previous_tick,
    validate_cron,
)

BERLIN = "Europe/Berlin"
# 2024 DST days in Berlin: clocks jump 02:00 -> 03:00 on 31 March, fall 03:00 -> 02:00 on
# 27 October.
SPRING_FORWARD = datetime(2024, 3, 31, tzinfo=UTC)
FALL_BACK = datetime(2024, 10, 27, tzinfo=UTC)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def test_previous_tick_includes_an_instant_that_is_itself_a_tick() -> None:
    assert previous_tick("0 */6 * * *", "UTC", utc(2024, 1, 1, 6)) == utc(2024, 1, 1, 6)


def test_previous_tick_returns_the_latest_earlier_tick_between_ticks() -> None:
    assert previous_tick("0 */6 * * *", "UTC", utc(2024, 1, 1, 11, 59)) == utc(2024, 1, 1, 6)


def test_results_are_utc_even_for_inputs_in_another_zone() -> None:
    at = datetime(2024, 1, 1, 12, tzinfo=ZoneInfo("Asia/Kolkata"))  # 06:30 UTC
    tick = previous_tick("0 * * * *", "UTC", at)
    assert tick == utc(2024, 1, 1, 6)
    assert tick.tzinfo is UTC


def test_cron_is_read_on_the_wall_clock_of_its_zone() -> None:
    winter = next_ticks("0 9 * * *", "America/New_York", utc(2024, 1, 10), 1)[0]
    summer = next_ticks("0 9 * * *", "America/New_York", utc(2024, 7, 10), 1)[0]
    assert (winter.hour, summer.hour) == (14, 13)


def test_next_ticks_are_strictly_after_the_given_instant() -> None:
    assert next_ticks("0 */6 * * *", "UTC", utc(2024, 1, 1, 6), 2) == [
        utc(2024, 1, 1, 12),
        utc(2024, 1, 1, 18),
    ]


def test_next_ticks_with_count_zero_is_empty() -> None:
    assert next_ticks("0 * * * *", "UTC", utc(2024, 1, 1), 0) == []


def test_missed_ticks_cover_since_exclusive_until_inclusive() -> None:
    assert missed_ticks("0 * * * *", "UTC", utc(2024, 1, 1, 1), utc(2024, 1, 1, 3)) == [
        utc(2024, 1, 1, 2),
        utc(2024, 1, 1, 3),
    ]


def test_missed_ticks_is_empty_when_until_is_not_after_since() -> None:
    assert missed_ticks("* * * * *", "UTC", utc(2024, 1, 1, 3), utc(2024, 1, 1, 3)) == []


def test_six_hourly_schedule_looks_back_six_hours() -> None:
    window = lookback_window("0 */6 * * *", utc(2024, 1, 1, 12))
    assert window == Window(utc(2024, 1, 1, 6), utc(2024, 1, 1, 12))


def test_weekday_schedule_on_monday_covers_the_weekend() -> None:
    monday = utc(2024, 1, 8, 9)
    window = lookback_window("0 9 * * 1-5", monday)
    assert window.start == utc(2024, 1, 5, 9)  # Friday
    assert window.duration == timedelta(days=3)


def test_window_starts_at_the_watermark_when_there_is_one() -> None:
    window = lookback_window("0 * * * *", utc(2024, 1, 1, 5), watermark=utc(2024, 1, 1, 1))
    assert window == Window(utc(2024, 1, 1, 1), utc(2024, 1, 1, 5))


def test_watermark_at_the_tick_gives_an_empty_window() -> None:
    window = lookback_window("0 * * * *", utc(2024, 1, 1, 5), watermark=utc(2024, 1, 1, 5))
    assert window.is_empty


def test_watermark_after_the_tick_gives_an_empty_window_at_the_tick() -> None:
    window = lookback_window("0 * * * *", utc(2024, 1, 1, 5), watermark=utc(2024, 1, 1, 7))
    assert (window.start, window.end, window.is_empty) == (utc(2024, 1, 1, 5),) * 2 + (True,)


def test_window_contains_its_end_but_not_its_start() -> None:
    window = Window(utc(2024, 1, 1), utc(2024, 1, 2))
    assert (window.contains(window.start), window.contains(window.end)) == (False, True)


def test_window_refuses_a_start_after_its_end() -> None:
    with pytest.raises(ScheduleError, match="after its end"):
        Window(utc(2024, 1, 2), utc(2024, 1, 1))


def test_daily_0230_in_berlin_fires_once_at_the_end_of_the_spring_forward_gap() -> None:
    ticks = next_ticks("30 2 * * *", BERLIN, SPRING_FORWARD - timedelta(days=1), 3)
    # 02:30 CET on the 30th, the gap's end (03:00 CEST = 01:00 UTC) on the 31st, 02:30 CEST.
    assert ticks == [utc(2024, 3, 30, 1, 30), utc(2024, 3, 31, 1), utc(2024, 4, 1, 0, 30)]


def test_daily_0230_in_berlin_fires_once_on_the_fall_back_day_at_the_first_occurrence() -> None:
    ticks = next_ticks("30 2 * * *", BERLIN, FALL_BACK - timedelta(days=1), 3)
    assert ticks == [utc(2024, 10, 26, 0, 30), utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)]


def test_ticks_in_one_dst_gap_collapse_into_one_fire() -> None:
    # 02:00, 02:20 and 02:40 do not exist on the spring-forward day; with 03:00 they are one.
    ticks = missed_ticks("*/20 * * * *", BERLIN, utc(2024, 3, 31, 0, 30), utc(2024, 3, 31, 1, 30))
    assert ticks == [utc(2024, 3, 31, 0, 40), utc(2024, 3, 31, 1), utc(2024, 3, 31, 1, 20)]


@pytest.mark.parametrize("day", [SPRING_FORWARD, FALL_BACK], ids=["spring", "autumn"])
def test_windows_around_a_dst_change_tile_without_gap_or_overlap(day: datetime) -> None:
    ticks = next_ticks("30 2 * * *", BERLIN, day - timedelta(days=2), 4)
    windows = [lookback_window("30 2 * * *", t, tz=BERLIN) for t in ticks]
    assert all(a.end == b.start for a, b in itertools.pairwise(windows))


def test_previous_tick_after_fall_back_finds_a_tick_whose_wall_clock_is_later() -> None:
    # 01:10 UTC is 02:10 CET, after the repeated hour began; 02:45 CEST (00:45 UTC) came first.
    assert previous_tick("45 2 * * *", BERLIN, utc(2024, 10, 27, 1, 10)) == utc(2024, 10, 27, 0, 45)


def test_is_tick_is_false_between_ticks() -> None:
    assert not is_tick("0 3 * * *", "UTC", utc(2024, 1, 1, 3, 1))


def test_aliases_are_accepted() -> None:
    assert previous_tick("@daily", "UTC", utc(2024, 1, 1, 12)) == utc(2024, 1, 1)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("0 25 * * *", "is invalid"),
        ("0 0 31 2 *", "never fires"),
        ("0 3 * * * *", "has 6 fields"),
        ("0 3 * *", "has 4 fields"),
        ("@sometimes", "is not one of"),
        ("", "has 0 fields"),
    ],
)
def test_invalid_cron_raises_schedule_error_naming_the_expression(
    expression: str, problem: str
) -> None:
    with pytest.raises(ScheduleError, match=problem) as caught:
        validate_cron(expression)
    assert repr(expression) in str(caught.value)


def test_unknown_time_zone_is_named() -> None:
    with pytest.raises(ScheduleError, match="'Mars/Olympus'"):
        previous_tick("0 * * * *", "Mars/Olympus", utc(2024, 1, 1))


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ScheduleError, match="naive"):
        previous_tick("0 * * * *", "UTC", datetime(2024, 1, 1))
