"""Cron ticks and lookback windows, evaluated in a schedule's time zone, returned in UTC.

A cron expression is read on the *wall clock* of its time zone (``0 3 * * *`` in
``Europe/Berlin`` fires at 03:00 Berlin time), but every datetime this module returns is a
timezone-aware UTC instant, and every argument must be timezone-aware.

Daylight-saving rules (one policy, so windows always tile):

* a wall-clock time that happens twice (autumn fall-back) fires once, at its first occurrence;
* a wall-clock time that does not exist (spring-forward gap) fires once, at the instant the
  gap ends (02:30 in Berlin on the spring-forward day fires at 03:00 CEST, 01:00 UTC);
* several wall-clock ticks that land on the same instant fire once.

Formally a wall-clock tick ``w`` fires at the earliest instant whose wall clock reads ``w`` or
later. That map never decreases, so ticks stay ordered and consecutive windows
``(previous tick, tick]`` cover time with no gap and no overlap.

>>> from datetime import datetime, UTC
>>> previous_tick("0 */6 * * *", "UTC", datetime(2024, 1, 1, 7, 15, tzinfo=UTC))
datetime.datetime(2024, 1, 1, 6, 0, tzinfo=datetime.timezone.utc)
>>> lookback_window("0 */6 * * *", datetime(2024, 1, 1, 6, tzinfo=UTC)).duration
datetime.timedelta(seconds=21600)
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter

from worker.errors import ScheduleError

#: Cron fields accepted: minute hour day-of-month month day-of-week. Seconds and years (which
#: croniter also parses) are refused: schedules are minute-grained, and a six-field string is
#: far more often a typo than a wish for a per-second consolidation.
CRON_FIELDS: Final = 5

#: The ``@`` shortcuts of classic cron; croniter expands them to five fields.
CRON_ALIASES: Final = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)

#: Every tick is a whole minute, so stepping back by one microsecond excludes exactly the
#: instant itself: "latest tick strictly before t" is "latest tick at or before t - 1 µs".
_EPSILON: Final = timedelta(microseconds=1)

#: How far around an instant to look for UTC-offset changes. Offsets of one zone differ by at
#: most 26 h (UTC-12 to UTC+14), so any wall-clock tick that a DST change can move past an
#: instant lies within this distance of it; one extra hour is margin.
_OFFSET_PROBE_HOURS: Final = 27

#: Step of that probe: every real offset lasts far longer than an hour.
_OFFSET_PROBE_STEP: Final = timedelta(hours=1)


@dataclass(frozen=True)
class Window:
    """The half-open time range ``(start, end]`` a scheduled run covers, in UTC.

    >>> from datetime import datetime, UTC
    >>> w = Window(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC))
    >>> w.duration.days, w.contains(w.start), w.contains(w.end)
    (1, False, True)
    """

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        start = _utc(self.start, "window start")
        end = _utc(self.end, "window end")
        if start > end:
            raise ScheduleError(f"window start {start.isoformat()} is after its end {end}")
        # Normalised to UTC so equal windows compare and print the same whatever zone built them.
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    @property
    def is_empty(self) -> bool:
        """True when nothing is left to cover: a later run already advanced past this tick."""
        return self.start == self.end

    def contains(self, at: datetime) -> bool:
        """Whether ``at`` lies in ``(start, end]``."""
        return self.start < _utc(at, "instant") <= self.end

    def as_tuple(self) -> tuple[datetime, datetime]:
        return (self.start, self.end)


def validate_cron(expression: str) -> str:
    """Return the expression with its whitespace normalised, or raise :class:`ScheduleError`.

    >>> validate_cron("  0  3 * * * ")
    '0 3 * * *'
    >>> validate_cron("0 25 * * *")
    Traceback (most recent call last):
    ...
    worker.errors.ScheduleError: cron expression '0 25 * * *' is invalid: ...
    """
    if not isinstance(expression, str):
        raise ScheduleError(f"cron expression must be a string, got {type(expression).__name__}")
    return _validated(" ".join(expression.split()))


@functools.lru_cache(maxsize=256)
def _validated(expression: str) -> str:
    if expression.startswith("@"):
        if expression not in CRON_ALIASES:
            raise ScheduleError(
                f"cron expression {expression!r} is not one of {', '.join(sorted(CRON_ALIASES))}"
            )
    elif len(expression.split()) != CRON_FIELDS:
        raise ScheduleError(
            f"cron expression {expression!r} has {len(expression.split())} fields; expected "
            "5: minute hour day-of-month month day-of-week"
        )
    try:
        # Parsing alone accepts dates that never come (``0 0 31 2 *``); ask for one real tick.
        croniter(expression, datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except CroniterBadDateError:
        raise ScheduleError(f"cron expression {expression!r} never fires") from None
    except (CroniterBadCronError, CroniterError, ValueError, KeyError) as exc:
        raise ScheduleError(f"cron expression {expression!r} is invalid: {exc}") from None
    return expression


@functools.lru_cache(maxsize=128)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``, or :class:`ScheduleError` naming it.

    >>> zone("Europe/Berlin").key
    'Europe/Berlin'
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ScheduleError(
            f"unknown time zone {name!r}; use an IANA name such as 'UTC' or 'Europe/Berlin'"
        ) from None


def previous_tick(cron: str, tz: str | ZoneInfo, at: datetime) -> datetime:
    """The latest tick of ``cron`` at or before ``at``.

    >>> from datetime import datetime, UTC
    >>> previous_tick("0 9 * * 1-5", "UTC", datetime(2024, 1, 8, 9, tzinfo=UTC))  # a Monday
    datetime.datetime(2024, 1, 8, 9, 0, tzinfo=datetime.timezone.utc)
    """
    return _latest_at_or_before(validate_cron(cron), _zone(tz), _utc(at, "at"))


def next_ticks(cron: str, tz: str | ZoneInfo, after: datetime, count: int) -> list[datetime]:
    """The first ``count`` ticks of ``cron`` strictly after ``after``.

    >>> from datetime import datetime, UTC
    >>> [t.hour for t in next_ticks("0 */6 * * *", "UTC", datetime(2024, 1, 1, tzinfo=UTC), 3)]
    [6, 12, 18]
    """
    if count < 0:
        raise ScheduleError(f"count must be >= 0, got {count}")
    ticks = _ticks_after(validate_cron(cron), _zone(tz), _utc(after, "after"))
    return [next(ticks) for _ in range(count)]


def missed_ticks(cron: str, tz: str | ZoneInfo, since: datetime, until: datetime) -> list[datetime]:
    """Every tick in ``(since, until]``, oldest first: the fires a stopped beat did not send.

    >>> from datetime import datetime, UTC
    >>> missed = missed_ticks("0 * * * *", "UTC", datetime(2024, 1, 1, 0, tzinfo=UTC),
    ...                       datetime(2024, 1, 1, 3, tzinfo=UTC))
    >>> [t.hour for t in missed]
    [1, 2, 3]
    """
    since_utc, until_utc = _utc(since, "since"), _utc(until, "until")
    missed: list[datetime] = []
    if until_utc <= since_utc:
        return missed
    for tick in _ticks_after(validate_cron(cron), _zone(tz), since_utc):
        if tick > until_utc:
            break
        missed.append(tick)
    return missed


def is_tick(cron: str, tz: str | ZoneInfo, at: datetime) -> bool:
    """Whether ``at`` is exactly one of the schedule's fire instants.

    >>> from datetime import datetime, UTC
    >>> is_tick("0 3 * * *", "UTC", datetime(2024, 1, 1, 3, tzinfo=UTC))
    True
    """
    at_utc = _utc(at, "at")
    return previous_tick(cron, tz, at_utc) == at_utc


def lookback_window(
    cron: str,
    tick: datetime,
    *,
    tz: str | ZoneInfo = "UTC",
    watermark: datetime | None = None,
) -> Window:
    """The window a run fired at ``tick`` covers.

    With a ``watermark`` (the end of this schedule's last successful window) it is
    ``(watermark, tick]``, so ticks missed since then are caught up; without one it is
    ``(previous tick, tick]``. A watermark at or after ``tick`` means a later run already
    covered this one: the window is empty (``(tick, tick]``).

    >>> from datetime import datetime, UTC
    >>> monday = datetime(2024, 1, 8, 9, tzinfo=UTC)
    >>> lookback_window("0 9 * * 1-5", monday).start   # back over the weekend to Friday
    datetime.datetime(2024, 1, 5, 9, 0, tzinfo=datetime.timezone.utc)
    >>> lookback_window("0 9 * * 1-5", monday, watermark=datetime(2024, 1, 4, 9, tzinfo=UTC)).start
    datetime.datetime(2024, 1, 4, 9, 0, tzinfo=datetime.timezone.utc)
    >>> lookback_window("0 9 * * 1-5", monday, watermark=monday).is_empty
    True
    """
    tick_utc = _utc(tick, "tick")
    if watermark is not None:
        mark = _utc(watermark, "watermark")
        return Window(min(mark, tick_utc), tick_utc)
    start = _latest_at_or_before(validate_cron(cron), _zone(tz), tick_utc - _EPSILON)
    return Window(start, tick_utc)


# --- internals ---------------------------------------------------------------------------------
#
# croniter is only ever given *wall-clock* times labelled as UTC, so it does plain calendar
# arithmetic and none of its own DST handling; this module maps wall clock <-> instants.


def format_tick(tick: datetime) -> str:
    """The wire form of a tick: ISO-8601 in UTC.

    >>> from datetime import datetime, UTC
    >>> format_tick(datetime(2024, 1, 1, 6, tzinfo=UTC))
    '2024-01-01T06:00:00+00:00'
    """
    if tick.tzinfo is None or tick.utcoffset() is None:
        raise ScheduleError(f"tick {tick.isoformat()} is naive; ticks are UTC instants")
    return tick.astimezone(UTC).isoformat()


def parse_tick(value: str) -> datetime:
    """Inverse of :func:`format_tick`; refuses a tick without an offset.

    >>> parse_tick("2024-01-01T06:00:00+00:00").hour
    6
    """
    try:
        tick = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ScheduleError(f"tick {value!r} is not an ISO-8601 datetime") from None
    if tick.tzinfo is None:
        raise ScheduleError(f"tick {value!r} has no UTC offset")
    return tick.astimezone(UTC)


def _zone(tz: str | ZoneInfo) -> ZoneInfo:
    return tz if isinstance(tz, ZoneInfo) else zone(tz)


def _utc(value: datetime, what: str) -> datetime:
    if not isinstance(value, datetime):
        raise ScheduleError(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ScheduleError(f"{what} {value.isoformat()} is naive; pass a timezone-aware datetime")
    return value.astimezone(UTC)


def _wall(instant: datetime, tz: tzinfo) -> datetime:
    """The wall clock of ``tz`` at ``instant``, labelled UTC (see the note above)."""
    return instant.astimezone(tz).replace(tzinfo=UTC, fold=0)


def _offset(instant: datetime, tz: tzinfo) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None  # a ZoneInfo always knows its offset for an aware instant
    return offset


def _offsets_near(instant: datetime, tz: tzinfo, direction: int) -> list[timedelta]:
    return [
        _offset(instant + direction * k * _OFFSET_PROBE_STEP, tz)
        for k in range(_OFFSET_PROBE_HOURS + 1)
    ]


def _instant(wall: datetime, tz: tzinfo) -> datetime:
    """The earliest instant whose wall clock in ``tz`` reads ``wall`` or later."""
    naive = wall.replace(tzinfo=None)
    first = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if _wall(first, tz) == wall:
        return first  # exists; fold=0 is its first occurrence when it happens twice
    # ``wall`` falls in a gap. With fold=0 zoneinfo applies the offset from before the gap (an
    # instant after it), with fold=1 the offset from after (an instant before it): bisect the
    # transition between them. Transitions fall on whole seconds.
    second = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    before, after = min(first, second), max(first, second)
    while after - before > timedelta(seconds=1):
        middle = before + (after - before) // 2
        middle = middle.replace(microsecond=0)
        if _wall(middle, tz) >= wall:
            after = middle
        else:
            before = middle
    return after


def _latest_at_or_before(expression: str, tz: tzinfo, at: datetime) -> datetime:
    # A fall-back can fire a wall-clock tick *later* than at's own wall clock at or before
    # ``at`` (02:45 CEST happened before 02:10 CET). Start the backward walk far enough ahead
    # to include those; the map wall -> instant never decreases, so the first hit is the latest.
    ahead = max(_offsets_near(at, tz, -1)) - _offset(at, tz)
    cursor = _wall(at, tz) + ahead + _EPSILON  # croniter's get_prev is strictly before
    walk = croniter(expression, cursor)
    while True:
        instant = _instant(walk.get_prev(datetime), tz)
        if instant <= at:
            return instant


def _ticks_after(expression: str, tz: tzinfo, after: datetime) -> Iterator[datetime]:
    # Mirror image: after a fall-back a wall-clock tick *earlier* than after's wall clock can
    # still lie ahead, so start the forward walk that much earlier.
    behind = _offset(after, tz) - min(_offsets_near(after, tz, +1))
    walk = croniter(expression, _wall(after, tz) - behind)
    last: datetime | None = None
    while True:
        instant = _instant(walk.get_next(datetime), tz)
        # Ticks inside one DST gap all land on the gap's end: fire that instant once.
        if instant > after and instant != last:
            last = instant
            yield instant
