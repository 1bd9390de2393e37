"""The model is checked before any work: ``memworker worker`` and ``memworker reconcile`` refuse
missing credentials, a missing provider package and a dead model server in one line on
stderr, with the exit code the table gives (2: configuration, 4: unreachable).

Each case runs the real command in a fresh process from a fresh data directory; the model
servers are real sockets on loopback: one that refuses connections, one that accepts and
never answers.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.errors import ConfigurationError, ModelUnavailable
from worker.service.sweep import build_consolidator, probe_model_server
from worker.settings import Settings

#: The two places the check must hold: a worker's start and a model-using operator command.
COMMANDS = {
    "worker": ["worker"],
    "reconcile": ["reconcile", "--user", "u1", "--dry-run"],
}

#: A provider LangChain knows whose package this environment does not have.
ABSENT_PROVIDER = "groq"

#: The probe's deadline in these tests (it never exceeds the model timeout).
PROBE_SECONDS = "0.5"


@pytest.fixture
def refusing_url() -> str:
    """A loopback port nothing listens on: connections are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A server that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"


def _memworker(
    args: list[str], tmp_path: Path, **settings: str
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMWORKER_", "OPENAI_"))}
    env |= {"MEMWORKER_DATA_DIR": str(tmp_path), "MEMWORKER_REDIS_URL": "redis://127.0.0.1:1/0"}
    env |= {f"MEMWORKER_{name.upper()}": value for name, value in settings.items()}
    env.pop("ANTHROPIC_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "worker", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _one_error_line(ran: subprocess.CompletedProcess[str]) -> str:
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith("error: "), ran.stderr
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS)
def test_missing_credentials_are_one_line_and_exit_2(command: str, tmp_path: Path) -> None:
    pytest.importorskip("langchain_openai")
    ran = _memworker(COMMANDS[command], tmp_path, model="openai:gpt-4o-mini")

    line = _one_error_line(ran)
    assert ran.returncode == 2
    assert "has no credentials: set OPENAI_API_KEY" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_provider_package_is_one_line_and_exit_2(command: str, tmp_path: Path) -> None:
    if importlib.util.find_spec(f"langchain_{ABSENT_PROVIDER}") is not None:
        pytest.skip(f"langchain-{ABSENT_PROVIDER} is installed here")
    ran = _memworker(COMMANDS[command], tmp_path, model=f"{ABSENT_PROVIDER}:some-model")

    line = _one_error_line(ran)
    assert ran.returncode == 2
    assert f"langchain-{ABSENT_PROVIDER}" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_model_server_that_refuses_is_one_line_and_exit_4(
    command: str, tmp_path: Path, refusing_url: str
) -> None:
    pytest.importorskip("langchain_openai")
    ran = _memworker(
        COMMANDS[command], tmp_path, model="openai:local", model_base_url=refusing_url,
        model_kwargs='{"api_key": "none"}',
    )  # fmt: skip

    line = _one_error_line(ran)
    assert ran.returncode == 4
    assert f"the model server at {refusing_url} is unreachable" in line


@pytest.mark.parametrize("command", COMMANDS)
def test_a_model_server_that_never_answers_times_out_at_the_probe_deadline(
    command: str, tmp_path: Path, silent_url: str
) -> None:
    pytest.importorskip("langchain_openai")
    ran = _memworker(
        COMMANDS[command], tmp_path, model="openai:local", model_base_url=silent_url,
        model_kwargs='{"api_key": "none"}', model_timeout_seconds=PROBE_SECONDS,
    )  # fmt: skip

    line = _one_error_line(ran)
    assert ran.returncode == 4
    assert f"the model server at {silent_url} did not answer within {PROBE_SECONDS} s" in line


def test_a_base_url_that_is_not_http_is_refused_before_anything_is_built() -> None:
    settings = Settings(model="openai:local", model_base_url="127.0.0.1:8080/v1")

    with pytest.raises(
        ConfigurationError, match=r"MEMWORKER_MODEL_BASE_URL='127\.0\.0\.1:8080/v1'"
    ):
        build_consolidator(settings.for_consolidation)


def test_a_base_url_with_a_port_that_is_not_a_number_is_refused() -> None:
    settings = Settings(model="openai:local", model_base_url="http://127.0.0.1:80a/v1")

    with pytest.raises(ConfigurationError, match="is not an http"):
        build_consolidator(settings.for_consolidation)


def test_an_unknown_provider_is_named_in_one_line() -> None:
    with pytest.raises(ConfigurationError) as refused:
        build_consolidator(Settings(model="nosuchprovider:m1").for_consolidation)

    assert "\n" not in str(refused.value)
    assert "MEMWORKER_MODEL='nosuchprovider:m1'" in str(refused.value)


def test_the_probe_reports_a_refusing_server_as_unavailable(refusing_url: str) -> None:
    with pytest.raises(ModelUnavailable, match="unreachable"):
        probe_model_server(
            Settings(model="openai:local", model_base_url=refusing_url).for_consolidation
        )


def test_the_rules_consolidator_needs_no_model_and_no_check() -> None:
    assert build_consolidator(Settings().for_consolidation).name == "rules"
