"""Schedules: cron ticks and lookback windows, schedule files, and beat's heartbeat.

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

Schedule entries: what runs when, loaded from TOML files in a folder.

A schedule file holds ``[[schedule]]`` tables::

    [[schedule]]
    name = "nightly-scan"            # unique across every file of the folder
    cron = "0 3 * * *"               # minute hour day-of-month month day-of-week
    timezone = "UTC"                 # IANA name the cron is read in; default UTC
    action = "scan_sources"          # consolidate_pending | scan_sources | compact
    scope = "user"                   # optional: only namespaces of this scope
    enabled = true                   # default true
    description = "Pull yesterday's conversations."

>>> spec = ScheduleSpec(name="nightly-scan", cron="0 3 * * *", action="scan_sources")
>>> spec.timezone, spec.enabled, spec.scope
('UTC', True, None)

Beat's heartbeat file: beat rewrites it on every loop, a health check reads its age.

The file holds one ISO-8601 UTC timestamp and is replaced atomically, so a reader never sees
a half-written value. Check it from a container health check with::

    python -m worker.service.schedules /var/lib/memworker/beat.heartbeat 60

which exits 0 when the heartbeat is at most 60 seconds old and 1 otherwise.

>>> import tempfile
>>> from datetime import datetime, timedelta, UTC
>>> path = Path(tempfile.mkdtemp()) / "beat.heartbeat"
>>> t0 = datetime(2024, 1, 1, tzinfo=UTC)
>>> write_heartbeat(path, t0)
>>> heartbeat_age(path, t0 + timedelta(seconds=5))
datetime.timedelta(seconds=5)
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, CroniterError, croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.errors import ScheduleError
from worker.types import ID_PATTERN, Scope

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


#: What a scheduled run does.
#: ``consolidate_pending`` drains pending queues (a safety net behind the debounced sweep);
#: ``scan_sources`` pulls conversations updated in the window from the sources and turns them
#: into candidates; ``compact`` re-renders files and evicts entries of files over budget.
Action = Literal["consolidate_pending", "scan_sources", "compact"]

#: The table name of one entry in a schedule file: ``[[schedule]]``.
SCHEDULE_TABLE: Final = "schedule"

#: Where the wheel carries the repository's ``schedules/`` folder (see pyproject's
#: ``force-include``), relative to the ``worker`` package.
PACKAGED_SCHEDULES: Final = "_default_schedules"


class ScheduleSpec(BaseModel):
    """One schedule entry, validated: a bad cron, zone or action never reaches beat."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=ID_PATTERN.pattern, description="Unique id; also the beat entry.")
    cron: str = Field(description="Five-field cron, read on the wall clock of `timezone`.")
    timezone: str = Field(default="UTC", description="IANA time zone of the cron expression.")
    action: Action
    scope: Scope | None = Field(default=None, description="Only namespaces of this scope.")
    enabled: bool = True
    description: str = ""

    @field_validator("cron")
    @classmethod
    def _cron_parses(cls, value: str) -> str:
        try:
            return validate_cron(value)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("timezone")
    @classmethod
    def _zone_exists(cls, value: str) -> str:
        try:
            zone(value)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return value


def load_schedules(directory: Path) -> list[ScheduleSpec]:
    """Every schedule of the ``*.toml`` files in ``directory``, files in name order.

    Raises :class:`ScheduleError` naming the file, the entry (1-based index and name) and the
    problem, e.g. ``a.toml: entry 2 ('nightly'): cron: cron expression '0 25 * * *' is invalid``.

    >>> specs = load_schedules(bundled_schedules_dir())
    >>> sorted(s.action for s in specs)
    ['compact', 'consolidate_pending', 'scan_sources']
    """
    if not directory.is_dir():
        raise ScheduleError(f"schedules folder {directory} does not exist or is not a folder")
    specs: list[ScheduleSpec] = []
    seen: dict[str, str] = {}  # name -> "file entry N", to name the first definition
    for path in sorted(directory.glob("*.toml")):
        for index, spec in enumerate(_load_file(path), start=1):
            where = f"{path.name} entry {index}"
            if spec.name in seen:
                raise ScheduleError(
                    f"{where} ({spec.name!r}): duplicate schedule name, first defined in "
                    f"{seen[spec.name]}"
                )
            seen[spec.name] = where
            specs.append(spec)
    return specs


def bundled_schedules_dir() -> Path:
    """The default schedules shipped with memworker.

    An installed wheel carries them inside the package; a source checkout reads the
    repository's top-level ``schedules/`` folder.
    """
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / PACKAGED_SCHEDULES, package.parent / "schedules"):
        if candidate.is_dir():
            return candidate
    raise ScheduleError(
        f"no bundled schedules found next to {package}; reinstall memworker or set "
        "MEMWORKER_SCHEDULES_DIR"
    )


def _load_file(path: Path) -> list[ScheduleSpec]:
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScheduleError(f"{path.name}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScheduleError(f"{path.name}: cannot be read: {exc}") from None
    unknown = sorted(set(document) - {SCHEDULE_TABLE})
    if unknown:
        raise ScheduleError(
            f"{path.name}: unknown top-level keys {unknown}; entries go in [[{SCHEDULE_TABLE}]] "
            "tables"
        )
    entries = document.get(SCHEDULE_TABLE, [])
    if not isinstance(entries, list):
        raise ScheduleError(f"{path.name}: '{SCHEDULE_TABLE}' must be [[{SCHEDULE_TABLE}]] tables")
    specs: list[ScheduleSpec] = []
    for index, entry in enumerate(entries, start=1):
        label = entry.get("name") if isinstance(entry, dict) else None
        where = f"{path.name} entry {index}" + (f" ({label!r})" if label is not None else "")
        if not isinstance(entry, dict):
            raise ScheduleError(f"{where}: must be a table")
        try:
            specs.append(ScheduleSpec.model_validate(entry))
        except ValidationError as exc:
            raise ScheduleError(f"{where}: {_problems(exc)}") from None
    return specs


def _problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "entry"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "literal_error" and field == "action":
            message = f"unknown action {error['input']!r}; {message.lower()}"
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


#: File name of the heartbeat inside the data directory.
HEARTBEAT_FILENAME: Final = "beat.heartbeat"

#: Longest beat sleeps between loops (and so between heartbeats). Celery's default is 300 s,
#: which would make a 5-minute-old heartbeat look healthy; 15 s keeps health checks quick.
HEARTBEAT_INTERVAL_SECONDS: Final = 15.0

#: A heartbeat older than this means beat is stuck or gone: four missed intervals, so one slow
#: loop (a broker reconnect) does not flap the health check.
HEARTBEAT_STALE_AFTER_SECONDS: Final = 4 * HEARTBEAT_INTERVAL_SECONDS


def write_heartbeat(path: Path, now: datetime) -> None:
    """Atomically replace ``path`` with ``now`` as ISO UTC; creates the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(now.astimezone(UTC).isoformat() + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def heartbeat_age(path: Path, now: datetime) -> timedelta | None:
    """How long ago the heartbeat at ``path`` was written, or None if missing or unreadable."""
    try:
        written = datetime.fromisoformat(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if written.tzinfo is None:
        return None
    return now - written


def is_fresh(path: Path, now: datetime, max_age: float = HEARTBEAT_STALE_AFTER_SECONDS) -> bool:
    """Whether beat wrote its heartbeat within ``max_age`` seconds before ``now``."""
    age = heartbeat_age(path, now)
    return age is not None and age <= timedelta(seconds=max_age)


def main(argv: list[str] | None = None) -> int:
    """Health-check entry point: ``PATH [MAX_AGE_SECONDS]``; 0 when fresh, 1 when stale."""
    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m worker.service.schedules PATH [MAX_AGE_SECONDS]", file=sys.stderr)
        return 2
    max_age = float(args[1]) if len(args) == 2 else HEARTBEAT_STALE_AFTER_SECONDS
    return 0 if is_fresh(Path(args[0]), datetime.now(UTC), max_age) else 1


if __name__ == "__main__":
    raise SystemExit(main())
