"""One configuration for the deployment: every process reads the environment, then the
``.env`` file of its working directory, then the defaults; ``postgres://`` URLs work."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from tests.integration.test_cli_support import Ops, ops
from worker.cli.app import app
from worker.settings import Settings, client_settings, load_settings
from worker.store.engine import create_store_engine

__all__ = ["ops"]


@pytest.fixture
def in_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of the test's own, with no MEMWORKER_* variable in the environment."""
    folder = tmp_path / "deploy"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_settings_read_a_setting_from_the_env_file_of_the_working_directory(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMWORKER_KEY_PREFIX", raising=False)
    (in_folder / ".env").write_text("MEMWORKER_KEY_PREFIX=fromfile\n")

    assert load_settings().key_prefix == "fromfile"


def test_the_environment_overrides_the_env_file(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_folder / ".env").write_text("MEMWORKER_KEY_PREFIX=fromfile\n")
    monkeypatch.setenv("MEMWORKER_KEY_PREFIX", "fromenv")

    assert Settings().key_prefix == "fromenv"


def test_other_programs_variables_in_the_env_file_are_left_alone(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMWORKER_SINKS", raising=False)
    (in_folder / ".env").write_text('OPENAI_API_KEY=sk-x\nMEMWORKER_SINKS=["files"]\n')

    assert Settings().sinks == ["files"]


def test_a_bad_value_in_the_env_file_is_named_like_one_in_the_environment(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMWORKER_QUEUE_SHARDS", raising=False)
    (in_folder / ".env").write_text("MEMWORKER_QUEUE_SHARDS=0\n")

    with pytest.raises(Exception, match="MEMWORKER_QUEUE_SHARDS"):
        load_settings()


def test_the_chat_side_client_reads_the_env_file_too(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMWORKER_REDIS_URL", raising=False)
    monkeypatch.delenv("MEMWORKER_KEY_PREFIX", raising=False)
    (in_folder / ".env").write_text(
        "MEMWORKER_REDIS_URL=redis://cache:6379/0\nMEMWORKER_KEY_PREFIX=chat\n"
    )

    s = client_settings()

    assert (s.redis_url, s.key_prefix) == ("redis://cache:6379/0", "chat")


def test_the_chat_side_client_prefers_the_environment_to_the_env_file(
    in_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_folder / ".env").write_text("MEMWORKER_KEY_PREFIX=chat\n")
    monkeypatch.setenv("MEMWORKER_KEY_PREFIX", "fromenv")

    assert client_settings().key_prefix == "fromenv"


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_a_postgres_url_without_a_driver_opens_the_store_with_psycopg(
    pg_database_url: str, scheme: str
) -> None:
    url = sa.engine.make_url(pg_database_url).set(drivername=scheme)
    engine = create_store_engine(url.render_as_string(hide_password=False))
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("select 1").scalar() == 1
        assert engine.url.drivername == "postgresql+psycopg"
    finally:
        engine.dispose()


def _bare(url: str) -> str:
    """A PostgreSQL URL as a hosting provider prints it (``postgres://``); SQLite's as is."""
    return url.replace("postgresql+psycopg://", "postgres://", 1)


def test_the_cli_takes_its_whole_configuration_from_the_env_file(ops: Ops, in_folder: Path) -> None:
    lines = [f"{name}={_bare(value)}" for name, value in ops.env.items()]
    (in_folder / ".env").write_text("\n".join(lines) + "\n")
    unset: dict[str, str | None] = dict.fromkeys(ops.env)
    runner = CliRunner()

    runner.invoke(app, ["enqueue", "--user", ops.user, "I prefer green tea"], env=unset)
    ran = runner.invoke(app, ["reconcile", "--user", ops.user], env=unset)

    assert ran.exit_code == 0, ran.stderr
    copy = ops.sink_file(f"user/{ops.user}/_default", "/memories/preferences.md")
    assert "green tea" in copy.read_text()
