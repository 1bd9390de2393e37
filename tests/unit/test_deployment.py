"""Deployment files: the compose file is valid Compose and keeps the promises the design makes.

Validation is offline: check-jsonschema carries the Compose specification's schema.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from worker.runtime.celery import LANES
from worker.service.schedules import HEARTBEAT_FILENAME

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"

#: Bound on one schema validation; it takes about a second.
VALIDATE_TIMEOUT_SECONDS = 120
#: One compose service per worker lane, named for it.
LANE_SERVICES = tuple(LANES)


def check_jsonschema() -> str | None:
    beside_python = Path(sys.executable).parent / "check-jsonschema"
    return str(beside_python) if beside_python.exists() else shutil.which("check-jsonschema")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def test_compose_file_passes_the_compose_specification_schema() -> None:
    tool = check_jsonschema()
    if tool is None:
        pytest.skip("check-jsonschema is not installed (pip install 'memworker[dev]')")
    result = subprocess.run(
        [tool, "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        timeout=VALIDATE_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_there_is_exactly_one_beat(services: dict[str, dict[str, Any]]) -> None:
    beat = services["beat"]
    assert beat.get("deploy", {}).get("replicas", 1) == 1
    assert beat.get("scale", 1) == 1


def test_redis_keeps_an_append_only_file_and_never_evicts(
    services: dict[str, dict[str, Any]],
) -> None:
    command = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in command
    assert "--maxmemory-policy noeviction" in command


@pytest.mark.parametrize("service", [*LANE_SERVICES, "beat"])
def test_workers_and_beat_wait_for_healthy_stores_and_a_finished_migration(
    services: dict[str, dict[str, Any]], service: str
) -> None:
    assert services[service]["depends_on"] == {
        "redis": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
        # Only when the rabbitmq profile is enabled (the broker at scale).
        "rabbitmq": {"condition": "service_healthy", "required": False},
    }


def test_migration_waits_for_a_healthy_postgres(services: dict[str, dict[str, Any]]) -> None:
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}


@pytest.mark.parametrize("service", ["redis", "postgres", "beat", *LANE_SERVICES])
def test_services_others_depend_on_have_health_checks(
    services: dict[str, dict[str, Any]], service: str
) -> None:
    assert services[service]["healthcheck"]["test"]


@pytest.mark.parametrize("service", LANE_SERVICES)
def test_each_lane_can_be_scaled(services: dict[str, dict[str, Any]], service: str) -> None:
    worker = services[service]
    assert "container_name" not in worker
    assert not worker.get("ports")  # a fixed host port would clash between replicas


@pytest.mark.parametrize(
    ("service", "command"),
    [
        ("migrate", ["db", "upgrade"]),
        *((lane, ["worker", "--lanes", lane]) for lane in LANE_SERVICES),
        ("beat", ["beat"]),
    ],
)
def test_memworker_services_run_their_subcommand(
    services: dict[str, dict[str, Any]], service: str, command: list[str]
) -> None:
    assert services[service]["command"] == command


def test_beat_health_check_reads_the_heartbeat_in_its_data_dir(
    services: dict[str, dict[str, Any]],
) -> None:
    beat = services["beat"]
    heartbeat = f"{beat['environment']['MEMWORKER_DATA_DIR']}/{HEARTBEAT_FILENAME}"
    assert beat["healthcheck"]["test"][1:5] == [
        "python",
        "-m",
        "worker.service.schedules",
        heartbeat,
    ]


@pytest.mark.parametrize("service", ["migrate", *LANE_SERVICES, "beat"])
def test_memworker_services_use_postgres_through_psycopg(
    services: dict[str, dict[str, Any]], service: str
) -> None:
    environment = services[service]["environment"]
    assert environment["MEMWORKER_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert environment["MEMWORKER_REDIS_URL"] == "redis://redis:6379/0"


def test_flower_only_starts_with_its_profile(services: dict[str, dict[str, Any]]) -> None:
    assert services["flower"]["profiles"] == ["flower"]


def test_image_runs_memworker_as_a_non_root_user() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()]
    final_stage = lines[max(i for i, line in enumerate(lines) if line.startswith("FROM ")) :]
    assert final_stage[0] == "FROM python:3.11-slim"
    users = [line.split()[1] for line in final_stage if line.startswith("USER ")]
    assert users
    assert users[-1] not in ("root", "0")
    assert 'ENTRYPOINT ["memworker"]' in final_stage
