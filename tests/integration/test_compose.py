"""The compose deployment is complete: one service per lane, each health-checked, Flower sees
the workers behind basic auth on loopback, data survives, operators have a CLI, a LangGraph
server can be fed by the store sink.

Read from ``docker-compose.yml`` itself (parsed, offline; Docker is not needed). What the file
runs is tried for real where it can be without Docker: Flower's Celery config must reach a
running memworker worker (and Flower's plain ``--broker`` setup must not); a lane's health
check must pass beside a running ``memworker worker --lanes`` of that lane and fail without
one; Flower's entrypoint must refuse to start without basic auth, and its health check must
send the credentials.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from celery import Celery
from celery.contrib.testing.worker import start_worker

from worker.runtime.celery import LANES, celery_argv, create_app
from worker.runtime.container import build_runtime
from worker.settings import Settings
from worker.types import SWEEP_LANE, queue_name

ROOT: Final = Path(__file__).resolve().parents[2]
COMPOSE: Final = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: Final[dict[str, dict[str, Any]]] = COMPOSE["services"]
#: One compose service per lane, named for it.
LANE_SERVICES: Final = tuple(LANES)
MEMWORKER_SERVICES: Final = ("migrate", *LANE_SERVICES, "beat", "cli")
#: ``${VAR:-default}``, compose's interpolation with a default.
INTERPOLATION: Final = re.compile(r"\$\{(\w+):-([^}]*)\}")
#: Bounds one ``celery inspect`` subprocess (it waits ``--timeout`` for replies).
INSPECT_TIMEOUT_SECONDS: Final = 120
#: How long a ``memworker worker --lanes`` subprocess may take to answer pings (imports Celery,
#: langchain; migrates its SQLite); polling ends as soon as it does.
LANE_START_SECONDS: Final = 120.0


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
    default_prefix = interpolate(SERVICES["sweep"]["environment"]["MEMWORKER_KEY_PREFIX"])
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
    assert config["broker_url"] == SERVICES["sweep"]["environment"]["MEMWORKER_REDIS_URL"]


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
    config = config.replace(SERVICES["sweep"]["environment"]["MEMWORKER_REDIS_URL"], redis_url)
    (tmp_path / f"{module}.py").write_text(config, encoding="utf-8")

    with_config = _celery_ping(tmp_path, f"--config={module}")
    plain_broker = _celery_ping(tmp_path, f"--broker={redis_url}")

    assert "pong" in with_config
    assert "No nodes replied" in plain_broker


def test_every_lane_has_a_service_of_its_own_running_only_that_lane() -> None:
    for lane in LANES:
        assert SERVICES[lane]["command"] == ["worker", "--lanes", lane]


def test_every_worker_lane_sends_task_events_for_flower() -> None:
    for lane in LANES.values():
        assert "--task-events" in celery_argv(lane, key_prefix="mw", concurrency=1, loglevel="INFO")


@pytest.mark.parametrize("service", [*LANE_SERVICES, "beat", "cli"])
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
    cli, worker = SERVICES["cli"], SERVICES["sweep"]

    assert cli["entrypoint"] == []  # `docker compose run --rm cli memworker status` runs as is
    assert cli["command"][0] == "memworker"
    assert cli["profiles"] == ["cli"]  # never started by `docker compose up`
    assert cli["depends_on"] == worker["depends_on"]
    shared = {k: v for k, v in worker["environment"].items() if k != "MEMWORKER_METRICS_PORT"}
    assert cli["environment"] == shared


@pytest.mark.parametrize("service", MEMWORKER_SERVICES)
def test_every_memworker_service_runs_under_an_init(service: str) -> None:
    # As PID 1, a lane hung in its shutdown could not kill itself at its stop deadline.
    assert SERVICES[service]["init"] is True


@pytest.mark.parametrize("service", MEMWORKER_SERVICES)
def test_every_memworker_service_shares_one_key_prefix(service: str) -> None:
    prefix = SERVICES[service]["environment"]["MEMWORKER_KEY_PREFIX"]

    assert prefix == "${MEMWORKER_KEY_PREFIX:-mw}"


#: The broker URL the compose file's header and docs/deployment.md give for the rabbitmq profile.
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
    assert RABBITMQ_BROKER in (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")


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


# --- health checks -----------------------------------------------------------------------------


def test_every_long_running_service_has_a_health_check() -> None:
    """One-shot services (``restart: "no"``: migrate, cli) are checked by finishing instead."""
    long_running = [name for name, spec in SERVICES.items() if spec.get("restart") != "no"]
    missing = [name for name in long_running if not SERVICES[name].get("healthcheck")]

    assert set(long_running) >= {*LANE_SERVICES, "beat", "redis", "postgres", "flower"}
    assert missing == []


def lane_health_script(tmp_path: Path) -> Path:
    """The lane-health config, saved where the lane services mount it, as a file to run."""
    (mount,) = {m["target"] for lane in LANE_SERVICES for m in SERVICES[lane]["configs"]}
    (source,) = {m["source"] for lane in LANE_SERVICES for m in SERVICES[lane]["configs"]}
    script = tmp_path / Path(mount).name
    script.write_text(interpolate(str(COMPOSE["configs"][source]["content"])), encoding="utf-8")
    return script


def _lane_health(script: Path, lane: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), lane],
        env=env,
        capture_output=True,
        text=True,
        timeout=INSPECT_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.mark.parametrize("lane", LANE_SERVICES)
def test_each_lane_service_runs_the_lane_health_check_for_its_own_lane(lane: str) -> None:
    (mount,) = SERVICES[lane]["configs"]

    assert SERVICES[lane]["healthcheck"]["test"] == ["CMD", "python", mount["target"], lane]


@pytest.mark.slow
def test_the_lane_health_check_passes_beside_a_running_lane_and_fails_for_a_missing_one(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "MEMWORKER_REDIS_URL": redis_url,
        "MEMWORKER_KEY_PREFIX": key_prefix,
        "MEMWORKER_DATA_DIR": str(tmp_path / "data"),
    }
    script = lane_health_script(tmp_path)
    memworker = Path(sys.executable).parent / "memworker"
    log = (tmp_path / "lane.log").open("wb")
    lane = subprocess.Popen(
        [str(memworker), "worker", "--lanes", "sweep"], env=env, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + LANE_START_SECONDS
        healthy = _lane_health(script, "sweep", env)
        while healthy.returncode != 0 and time.monotonic() < deadline and lane.poll() is None:
            healthy = _lane_health(script, "sweep", env)
        missing = _lane_health(script, "deliver", env)
    finally:
        lane.terminate()
        lane.wait(timeout=30)
        log.close()

    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert healthy.stdout.startswith("sweep.")
    assert missing.returncode == 1
    assert "no deliver worker answers" in missing.stdout


# --- Flower -----------------------------------------------------------------------------------


def test_flower_is_published_on_loopback_only() -> None:
    assert SERVICES["flower"]["ports"] == ["127.0.0.1:5555:5555"]


def _flower_entrypoint(auth: str) -> subprocess.CompletedProcess[str]:
    """Flower's entrypoint as the container runs it (compose turns ``$$`` into ``$``), with
    ``echo`` standing in for Flower itself."""
    entrypoint = [part.replace("$$", "$") for part in SERVICES["flower"]["entrypoint"]]
    return subprocess.run(
        [*entrypoint, "echo", "flower started"],
        env={"PATH": os.environ["PATH"], "FLOWER_BASIC_AUTH": auth},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_flower_refuses_to_start_without_basic_auth_and_starts_with_it() -> None:
    refused, started = _flower_entrypoint(""), _flower_entrypoint("admin:secret")

    assert refused.returncode == 2
    assert "set FLOWER_BASIC_AUTH=user:password" in refused.stderr
    assert started.stdout == "flower started\n"
    # Flower reads its basic auth from this variable (FLOWER_ options), set from the host's.
    assert SERVICES["flower"]["environment"]["FLOWER_BASIC_AUTH"] == "${FLOWER_BASIC_AUTH:-}"


class _BasicAuthOnly(BaseHTTPRequestHandler):
    """Answers ``/healthcheck`` with 200 only to the credentials the test set."""

    expected = ""

    def do_GET(self) -> None:
        good = self.headers.get("Authorization") == self.expected
        self.send_response(200 if good and self.path == "/healthcheck" else 401)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _flower_health(port: int, auth: str) -> int:
    (code,) = [part for part in SERVICES["flower"]["healthcheck"]["test"] if "urlopen" in part]
    done = subprocess.run(
        [sys.executable, "-c", code.replace("127.0.0.1:5555", f"127.0.0.1:{port}")],
        env={"PATH": os.environ["PATH"], "FLOWER_BASIC_AUTH": auth},
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode


def test_flowers_health_check_sends_the_basic_auth_credentials() -> None:
    _BasicAuthOnly.expected = "Basic " + base64.b64encode(b"admin:secret").decode()
    server = HTTPServer(("127.0.0.1", 0), _BasicAuthOnly)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with_auth = _flower_health(server.server_port, "admin:secret,ops:other")
        wrong = _flower_health(server.server_port, "admin:wrong")
    finally:
        server.shutdown()

    assert with_auth == 0
    assert wrong != 0


# --- the LangGraph server profile --------------------------------------------------------------


def test_the_langgraph_profile_serves_the_example_the_store_sink_can_publish_to() -> None:
    server, worker = SERVICES["langgraph"], SERVICES["sweep"]
    compose_text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")

    assert server["profiles"] == ["langgraph"]
    assert server["ports"] == ["127.0.0.1:2024:2024"]
    assert server["build"]["target"] == "langgraph"
    assert "FROM python:3.11-slim AS langgraph" in dockerfile
    assert '"--config", "examples/deep_agent/langgraph.json"' in dockerfile
    assert (ROOT / "examples" / "deep_agent" / "langgraph.json").exists()
    # The agent enqueues to the lanes' queue and reads the store layout they publish with.
    shared = {k: v for k, v in worker["environment"].items() if k != "MEMWORKER_METRICS_PORT"}
    assert {k: server["environment"][k] for k in shared} == shared
    # The commented sink example names this service and the port it listens on.
    assert "MEMWORKER_LANGGRAPH_URL=http://langgraph:2024" in compose_text


def test_the_store_sink_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = SERVICES["sweep"]["environment"]
    for name in ("MEMWORKER_SINKS", "MEMWORKER_LANGGRAPH_URL"):
        monkeypatch.setenv(name, interpolate(environment[name]))

    settings = Settings()  # as the lane reads its environment

    assert settings.sinks == ["files"]
    assert not settings.langgraph_url  # empty: no store sink, no thread scans
