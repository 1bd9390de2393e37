"""Beat's heartbeat file and the health check that reads it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import time_machine

from worker.service.schedules import heartbeat_age, is_fresh, main, write_heartbeat

T0 = datetime(2024, 1, 1, 12, tzinfo=UTC)


def test_age_is_the_time_since_the_last_write(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    write_heartbeat(path, T0)
    assert heartbeat_age(path, T0 + timedelta(seconds=42)) == timedelta(seconds=42)


def test_a_rewrite_replaces_the_previous_beat(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    write_heartbeat(path, T0)
    write_heartbeat(path, T0 + timedelta(seconds=30))
    assert heartbeat_age(path, T0 + timedelta(seconds=30)) == timedelta(0)


def test_writing_creates_the_folder_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "data" / "hb"
    write_heartbeat(path, T0)
    assert [p.name for p in path.parent.iterdir()] == ["hb"]


def test_a_missing_heartbeat_has_no_age(tmp_path: Path) -> None:
    assert heartbeat_age(tmp_path / "absent", T0) is None


def test_a_garbled_heartbeat_has_no_age(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    path.write_text("not a time")
    assert heartbeat_age(path, T0) is None


def test_a_heartbeat_older_than_the_limit_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    write_heartbeat(path, T0)
    assert not is_fresh(path, T0 + timedelta(seconds=61), max_age=60)


def test_health_check_exits_zero_on_a_fresh_heartbeat(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    write_heartbeat(path, T0)
    with time_machine.travel(T0 + timedelta(seconds=10), tick=False):
        assert main([str(path), "60"]) == 0


def test_health_check_exits_one_on_a_stale_heartbeat(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    write_heartbeat(path, T0)
    with time_machine.travel(T0 + timedelta(seconds=120), tick=False):
        assert main([str(path), "60"]) == 1


def test_health_check_exits_two_on_bad_usage() -> None:
    assert main([]) == 2
