"""Schedule files: loading, the bundled defaults, and errors that name file, entry and problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.errors import ScheduleError
from worker.models import Scope
from worker.service.schedules import ScheduleSpec, bundled_schedules_dir, load_schedules

REPO_SCHEDULES = Path(__file__).resolve().parents[2] / "schedules"


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


ENTRY = """
[[schedule]]
name = "{name}"
cron = "{cron}"
timezone = "{tz}"
action = "{action}"
"""


def entry(
    name: str = "nightly", cron: str = "0 3 * * *", tz: str = "UTC", action: str = "compact"
) -> str:
    return ENTRY.format(name=name, cron=cron, tz=tz, action=action)


def test_loads_every_field_of_an_entry(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.toml",
        """
[[schedule]]
name = "berlin-scan"
cron = "30 2 * * 1-5"
timezone = "Europe/Berlin"
action = "scan_sources"
scope = "agent"
enabled = false
description = "weekday scan"
""",
    )
    assert load_schedules(tmp_path) == [
        ScheduleSpec(
            name="berlin-scan",
            cron="30 2 * * 1-5",
            timezone="Europe/Berlin",
            action="scan_sources",
            scope=Scope.AGENT,
            enabled=False,
            description="weekday scan",
        )
    ]


def test_files_load_in_name_order(tmp_path: Path) -> None:
    write(tmp_path, "b.toml", entry(name="second"))
    write(tmp_path, "a.toml", entry(name="first"))
    assert [s.name for s in load_schedules(tmp_path)] == ["first", "second"]


def test_files_without_toml_suffix_are_ignored(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt", "not a schedule")
    assert load_schedules(tmp_path) == []


def test_bad_cron_names_file_entry_and_expression(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", entry(name="ok") + entry(name="broken", cron="0 25 * * *"))
    with pytest.raises(ScheduleError) as caught:
        load_schedules(tmp_path)
    message = str(caught.value)
    assert message.startswith("a.toml entry 2 ('broken'): cron:")
    assert "'0 25 * * *'" in message


def test_unknown_time_zone_names_the_zone(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", entry(tz="Europe/Atlantis"))
    with pytest.raises(ScheduleError, match=r"a\.toml entry 1 \('nightly'\): timezone: .*Atlantis"):
        load_schedules(tmp_path)


def test_unknown_action_is_named(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", entry(action="reindex"))
    with pytest.raises(
        ScheduleError, match=r"entry 1 \('nightly'\): action: unknown action 'reindex'"
    ):
        load_schedules(tmp_path)


def test_duplicate_name_across_files_names_both_places(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", entry(name="nightly"))
    write(tmp_path, "b.toml", entry(name="other") + entry(name="nightly"))
    with pytest.raises(
        ScheduleError, match=r"b\.toml entry 2 \('nightly'\): duplicate .* a\.toml entry 1"
    ):
        load_schedules(tmp_path)


def test_invalid_name_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", entry(name="no spaces"))
    with pytest.raises(ScheduleError, match=r"entry 1 \('no spaces'\): name:"):
        load_schedules(tmp_path)


def test_unknown_field_in_an_entry_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", entry() + 'queue = "fast"\n')
    with pytest.raises(ScheduleError, match="queue: Extra inputs are not permitted"):
        load_schedules(tmp_path)


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", '[[schedule]]\nname = "x"\naction = "compact"\n')
    with pytest.raises(ScheduleError, match=r"entry 1 \('x'\): cron: Field required"):
        load_schedules(tmp_path)


def test_unknown_top_level_key_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", '[schedules]\nname = "x"\n')
    with pytest.raises(ScheduleError, match=r"a\.toml: unknown top-level keys \['schedules'\]"):
        load_schedules(tmp_path)


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", "[[schedule]\nname = \n")
    with pytest.raises(ScheduleError, match=r"a\.toml: not valid TOML"):
        load_schedules(tmp_path)


def test_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScheduleError, match="does not exist"):
        load_schedules(tmp_path / "nope")


def test_bundled_schedules_are_the_repository_defaults_in_a_checkout() -> None:
    assert (bundled_schedules_dir() / "default.toml").read_bytes() == (
        REPO_SCHEDULES / "default.toml"
    ).read_bytes()


def test_default_schedules_cover_every_action() -> None:
    specs = load_schedules(REPO_SCHEDULES)
    assert {s.action for s in specs} == {"consolidate_pending", "scan_sources", "compact"}


def test_every_default_schedule_is_explained_by_a_comment_and_a_description() -> None:
    lines = (REPO_SCHEDULES / "default.toml").read_text(encoding="utf-8").splitlines()
    tables = [i for i, line in enumerate(lines) if line.strip() == "[[schedule]]"]
    assert tables
    assert all(lines[i - 1].startswith("# ") for i in tables)
    assert all(spec.description for spec in load_schedules(REPO_SCHEDULES))
