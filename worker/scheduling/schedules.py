"""Schedule entries: what runs when, loaded from TOML files in a folder.

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
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from worker.constants import ID_PATTERN
from worker.errors import ScheduleError
from worker.namespaces import Scope
from worker.scheduling.cron import validate_cron, zone

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
