"""The hot-path client's settings: the client's fields of the worker's settings, read from the
same variables by the same reader, never a worker-only variable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worker.errors import ConfigurationError
from worker.settings import CLIENT_FIELDS, ClientSettings, Settings, client_settings


def test_the_client_slice_has_the_worker_settings_defaults() -> None:
    defaults = Settings.model_construct()

    assert ClientSettings.model_construct() == ClientSettings.of(defaults)
    assert ClientSettings.model_construct().embedded_redis_socket == defaults.embedded_redis_socket


def test_every_client_field_is_a_field_of_the_worker_settings() -> None:
    assert set(CLIENT_FIELDS) <= set(Settings.model_fields)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.lower().startswith("memworker_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_the_client_reads_its_variables_from_the_environment(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_env.setenv("MEMWORKER_REDIS_URL", "redis://cache:6379/2")
    clean_env.setenv("MEMWORKER_DATA_DIR", str(tmp_path))
    clean_env.setenv("MEMWORKER_KEY_PREFIX", "chat")
    clean_env.setenv("MEMWORKER_QUEUE_SHARDS", "16")
    clean_env.setenv("MEMWORKER_MAX_TEXT_BYTES", "1024")
    clean_env.setenv("MEMWORKER_SOCKET_TIMEOUT_SECONDS", "0.5")
    clean_env.setenv("MEMWORKER_ALLOW_EVICTING_REDIS", "true")

    assert client_settings() == ClientSettings(
        redis_url="redis://cache:6379/2",
        data_dir=tmp_path,
        key_prefix="chat",
        queue_shards=16,
        max_text_bytes=1024,
        socket_timeout_seconds=0.5,
        allow_evicting_redis=True,
    )


def test_variable_names_match_in_any_case_as_the_worker_reads_them(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("memworker_key_prefix", "lower")

    assert client_settings().key_prefix == Settings().key_prefix == "lower"


def test_an_unusual_spelling_is_read_as_the_worker_reads_it(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("MEMWORKER_ALLOW_EVICTING_REDIS", "YES")
    clean_env.setenv("MEMWORKER_QUEUE_SHARDS", " 8")

    assert (client_settings().allow_evicting_redis, client_settings().queue_shards) == (True, 8)


def test_a_worker_only_variable_is_not_read_by_the_client(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MEMWORKER_DEBOUNCE_SECONDS", "soon")

    assert client_settings("redis://cache:6379/0") == ClientSettings(
        redis_url="redis://cache:6379/0"
    )
    assert client_settings().key_prefix == "mw"


def test_a_bad_client_variable_is_named_as_the_worker_settings_name_it(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("MEMWORKER_QUEUE_SHARDS", "many")

    with pytest.raises(ConfigurationError) as raised:
        client_settings()

    assert str(raised.value) == (
        "invalid client settings: queue_shards: Input should be a valid integer, unable to "
        "parse string as an integer (argument or MEMWORKER_QUEUE_SHARDS)"
    )


def test_a_url_argument_leaves_the_environment_unread(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MEMWORKER_KEY_PREFIX", "not read")

    assert client_settings("redis://cache:6379/0").key_prefix == "mw"


def test_a_worker_setting_override_is_checked_then_left_out_of_the_slice() -> None:
    assert client_settings("redis://cache:6379/0", debounce_seconds=5) == ClientSettings(
        redis_url="redis://cache:6379/0"
    )


def test_the_slice_of_worker_settings_keeps_their_values(tmp_path: Path) -> None:
    settings = Settings(redis_url="redis://cache:6379/0", data_dir=tmp_path, queue_shards=4)

    assert ClientSettings.of(settings) == ClientSettings(
        redis_url="redis://cache:6379/0", data_dir=tmp_path, queue_shards=4
    )
