"""The compose deployment is complete: Flower sees the workers, data survives, operators have a CLI.

Read from ``docker-compose.yml`` itself (parsed, offline; Docker is not needed). Flower's
Celery config is also tried for real: a Celery client configured with exactly that config
(pointed at the test's Redis) must reach a running memworker worker, and one without it
(Flower's plain ``--broker`` setup of before) must not.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from celery import Celery
from celery.contrib.testing.worker import start_worker

from worker.runtime.container import build_runtime
from worker.settings import Settings
from worker.tasks.app import create_app
from worker.tasks.lanes import LANES, celery_argv
from worker.tasks.names import SWEEP_LANE, queue_name

ROOT: Final = Path(__file__).resolve().parent.parent
COMPOSE: Final = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: Final[dict[str, dict[str, Any]]] = COMPOSE["services"]
MEMWORKER_SERVICES: Final = ("migrate", "worker", "beat", "cli")
#: ``${VAR:-default}``, compose's interpolation with a default.
INTERPOLATION: Final = re.compile(r"\$\{(\w+):-([^}]*)\}")
#: Bounds one ``celery inspect`` subprocess (it waits ``--timeout`` for replies).
INSPECT_TIMEOUT_SECONDS: Final = 120


def interpolate(text: str, **values: str) -> str:
    """``text`` as compose renders it with ``values`` set (and every other variable unset)."""
    return INTERPOLATION.sub(lambda m: values.get(m.group(1), m.group(2)), text)


def flower_config() -> str:
    (mount,) = SERVICES["flower"]["configs"]
    return str(COMPOSE["configs"][mount["source"]]["content"])


def test_flower_loads_its_config_module_from_where_it_is_mounted() -> None:
    flower = SERVICES["flower"]
    (mount,) = flower["configs"]
    module = Path(mount["target"])

    assert module.parent == Path(flower["working_dir"])
    assert f"--config={module.stem}" in flower["command"]


def test_flowers_key_prefix_is_the_one_the_workers_put_on_celery_keys(
    redis_url: str, tmp_path: Path
) -> None:
    default_prefix = interpolate(SERVICES["worker"]["environment"]["MEMWORKER_KEY_PREFIX"])
    config: dict[str, Any] = {}
    exec(interpolate(flower_config()), config)  # the module Flower imports
    settings = Settings(redis_url=redis_url, key_prefix=default_prefix, data_dir=tmp_path)
    app = create_app(settings)
    try:
        workers = app.conf.broker_transport_options["global_keyprefix"]
    finally:
        app.memworker_runtime.close()

    assert default_prefix == Settings.model_fields["key_prefix"].default
    assert config["broker_transport_options"]["global_keyprefix"] == workers
    assert config["broker_url"] == SERVICES["worker"]["environment"]["MEMWORKER_REDIS_URL"]


@pytest.fixture
def running_worker(settings: Settings) -> Iterator[Celery]:
    runtime = build_runtime(settings)
    app = create_app(settings, runtime=runtime)
    try:
        with start_worker(
            app,
            pool="threads",
            concurrency=1,
            queues=[queue_name(settings.key_prefix, SWEEP_LANE)],
            perform_ping_check=False,
        ):
            yield app
    finally:
        runtime.close()


def _celery_ping(directory: Path, *argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "celery", *argv, "inspect", "ping", "--timeout=3"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=INSPECT_TIMEOUT_SECONDS,
        check=False,
    )
    return done.stdout + done.stderr


def test_a_celery_client_with_flowers_config_reaches_the_workers_and_one_without_does_not(
    running_worker: Celery, settings: Settings, redis_url: str, tmp_path: Path
) -> None:
    (mount,) = SERVICES["flower"]["configs"]
    module = Path(mount["target"]).stem
    config = interpolate(flower_config(), MEMWORKER_KEY_PREFIX=settings.key_prefix)
    config = config.replace(SERVICES["worker"]["environment"]["MEMWORKER_REDIS_URL"], redis_url)
    (tmp_path / f"{module}.py").write_text(config, encoding="utf-8")

    with_config = _celery_ping(tmp_path, f"--config={module}")
    plain_broker = _celery_ping(tmp_path, f"--broker={redis_url}")

    assert "pong" in with_config
    assert "No nodes replied" in plain_broker


def test_every_worker_lane_sends_task_events_for_flower() -> None:
    assert SERVICES["worker"]["command"] == ["worker"]  # `memworker worker`: every lane
    for lane in LANES.values():
        assert "--task-events" in celery_argv(lane, key_prefix="mw", concurrency=1, loglevel="INFO")


@pytest.mark.parametrize("service", ["worker", "beat", "cli"])
def test_the_data_directory_is_a_named_volume(service: str) -> None:
    data_dir = SERVICES[service]["environment"]["MEMWORKER_DATA_DIR"]
    mounts = [v.split(":") for v in SERVICES[service]["volumes"]]

    (volume,) = [name for name, target in mounts if target == data_dir]
    assert volume in COMPOSE["volumes"]


def test_redis_fsyncs_its_append_only_file_on_every_write() -> None:
    command = " ".join(SERVICES["redis"]["command"])

    assert "--appendonly yes" in command
    assert "--appendfsync always" in command
    assert "--maxmemory-policy noeviction" in command


def test_the_cli_service_runs_the_command_it_is_given_on_the_deployment() -> None:
    cli, worker = SERVICES["cli"], SERVICES["worker"]

    assert cli["entrypoint"] == []  # `docker compose run --rm cli memworker status` runs as is
    assert cli["command"][0] == "memworker"
    assert cli["profiles"] == ["cli"]  # never started by `docker compose up`
    assert cli["depends_on"] == worker["depends_on"]
    shared = {k: v for k, v in worker["environment"].items() if k != "MEMWORKER_METRICS_PORT"}
    assert cli["environment"] == shared


@pytest.mark.parametrize("service", MEMWORKER_SERVICES)
def test_every_memworker_service_shares_one_key_prefix(service: str) -> None:
    prefix = SERVICES[service]["environment"]["MEMWORKER_KEY_PREFIX"]

    assert prefix == "${MEMWORKER_KEY_PREFIX:-mw}"


#: The broker URL the compose file's header and the README give for the rabbitmq profile.
RABBITMQ_BROKER: Final = "amqp://memworker:memworker@rabbitmq:5672/memworker"


def test_the_rabbitmq_profile_serves_the_broker_url_the_readme_gives() -> None:
    rabbit = SERVICES["rabbitmq"]
    env = {k: interpolate(str(v)) for k, v in rabbit["environment"].items()}
    user, password, vhost = (
        env["RABBITMQ_DEFAULT_USER"],
        env["RABBITMQ_DEFAULT_PASS"],
        env["RABBITMQ_DEFAULT_VHOST"],
    )

    assert rabbit["profiles"] == ["rabbitmq"]  # `docker compose up` alone keeps Redis as broker
    assert f"amqp://{user}:{password}@rabbitmq:5672/{vhost}" == RABBITMQ_BROKER
    assert RABBITMQ_BROKER in (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    assert RABBITMQ_BROKER in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("service", MEMWORKER_SERVICES)
def test_every_memworker_service_takes_the_broker_url_and_waits_for_rabbitmq_if_enabled(
    service: str,
) -> None:
    spec = SERVICES[service]
    assert spec["environment"]["MEMWORKER_BROKER_URL"] == "${MEMWORKER_BROKER_URL:-}"
    if service != "migrate":  # the schema job needs no broker
        assert spec["depends_on"]["rabbitmq"] == {"condition": "service_healthy", "required": False}


def test_an_empty_broker_url_means_the_queues_redis() -> None:
    settings = Settings(redis_url="redis://redis:6379/0", broker_url=interpolate("${X:-}"))
    app = create_app(settings)

    assert app.conf.broker_url == "redis://redis:6379/0"
    assert "redis" in interpolate(flower_config())  # and Flower watches the same broker
