"""The worker's lanes, as an operator runs them: real ``memworker`` processes on real Redis.

A sink that accepts connections and never answers holds only the deliver lane: every
namespace still commits within its debounce and a sweep, and the sink catches up once it
answers again. A lane that dies takes the whole worker down (so its supervisor restarts it)
instead of leaving a half-running worker; a worker on an unmigrated database refuses to start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.langgraph_fixtures import langgraph_url  # noqa: F401 - a fixture
from tests.support.tcp_proxy import TcpProxy
from tests.support.waiting import wait_for
from worker.connectors.langgraph import LangGraphStoreSink
from worker.models import Namespace
from worker.queue.client import MemoryClient
from worker.queue.redis import open_redis
from worker.runtime.processes import STOP_DEADLINE_SECONDS, embedded_redis
from worker.settings import Settings
from worker.store.memory import MemoryStore

#: Bounds every wait; polling stops as soon as the state is reached.
BOUND_SECONDS = 120.0
USERS = 8
#: Every namespace must commit (and reach the healthy sink) within this while the other sink
#: hangs ...
COMMIT_BOUND = 20.0
#: ... which is shorter than one stuck sink call.
STUCK_SINK_SECONDS = 30


def worker_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")}
    return env | {
        "MEMWORKER_REDIS_URL": str(settings.redis_url),
        "MEMWORKER_KEY_PREFIX": settings.key_prefix,
        "MEMWORKER_DATABASE_URL": str(settings.database_url),
        "MEMWORKER_DATA_DIR": str(settings.data_dir),
        "MEMWORKER_QUEUE_SHARDS": str(settings.queue_shards),
        "MEMWORKER_DEBOUNCE_SECONDS": "0.2",
        "MEMWORKER_MAX_WAIT_SECONDS": "1",
        "MEMWORKER_SWEEP_INTERVAL_SECONDS": "0.5",
        **extra,
    }


@pytest.fixture
def store(settings: Settings) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(str(settings.database_url), create=True)
    yield s
    s.dispose()


@pytest.fixture
def lg_proxy(langgraph_url: str) -> Iterator[TcpProxy]:  # noqa: F811 - the fixture above
    parsed = urlparse(langgraph_url)
    with TcpProxy(parsed.hostname or "127.0.0.1", parsed.port or 80) as proxy:
        yield proxy


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "worker", *argv], env=env, stdout=out, stderr=subprocess.STDOUT
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_hung_sink_delays_no_commit_and_no_other_sink_and_catches_up_once_it_answers(
    settings: Settings, store: MemoryStore, lg_proxy: TcpProxy, tmp_path: Path
) -> None:
    sink_url = f"http://127.0.0.1:{lg_proxy.port}"
    env = worker_env(
        settings,
        MEMWORKER_SINKS=json.dumps(["langgraph", "files"]),
        MEMWORKER_LANGGRAPH_URL=sink_url,
        # Longer than the commits may take: a delivery stuck on the sink holds its thread
        # for the whole wait below, so if merges, sweeps or the other sink shared that
        # thread, they would stall with it.
        MEMWORKER_SINK_TIMEOUT_SECONDS=str(STUCK_SINK_SECONDS),
    )
    sink = LangGraphStoreSink(sink_url)
    store_client = get_sync_client(url=sink_url)

    def in_store(user: str) -> bool:
        ns = sink.namespace_for(Namespace.for_user(user).key)
        return bool(store_client.store.search_items(ns)["items"])

    warm = f"warm-{settings.key_prefix}"
    users = [f"u{i}-{settings.key_prefix}" for i in range(USERS)]
    proc = start(["run", "--loglevel", "INFO"], env, tmp_path / "run.log")
    try:
        with MemoryClient(settings) as client:
            client.enqueue(user_id=warm, trace_id="t0", text="I prefer coffee")
            wait_for(lambda: in_store(warm), "the worker to start and publish a first memory")
            lg_proxy.freeze()  # the store accepts connections and never answers
            for user in users:
                client.enqueue(user_id=user, trace_id="t1", text=f"I prefer tea number {user}")

        def all_committed() -> bool:
            return all(store.load_state(f"user:{u}").version == 1 for u in users)

        wait_for(all_committed, "every namespace to commit while the sink hangs", COMMIT_BOUND)
        files = settings.effective_files_dir
        wait_for(
            lambda: len(list(files.rglob("*.md"))) == USERS + 1, "the files sink", COMMIT_BOUND
        )
        lg_proxy.thaw()
        wait_for(lambda: all(in_store(u) for u in users), "the store to catch up after the hang")
    finally:
        stop(proc)
    log = (tmp_path / "run.log").read_text(errors="replace")
    # One INFO line per consolidation; no line per sweep, task or HTTP request at INFO.
    assert log.count(" committed v1: ") == USERS + 1
    assert "Sending due task" not in log
    assert "] received" not in log
    assert "HTTP Request:" not in log


def lane_pids(parent: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found.add(int(stat.parent.name))
    return found


def three(pids: set[int]) -> set[int] | None:
    return pids if len(pids) == 3 else None


def test_a_lane_that_dies_stops_the_whole_worker_with_an_error(
    settings: Settings, store: MemoryStore, tmp_path: Path
) -> None:
    proc = start(["worker", "--loglevel", "WARNING"], worker_env(settings), tmp_path / "w.log")
    try:
        lanes = wait_for(lambda: three(lane_pids(proc.pid)), "the three lane processes")
        os.kill(min(lanes), signal.SIGKILL)
        code = proc.wait(timeout=BOUND_SECONDS)
    finally:
        stop(proc)

    assert code == 1
    assert "stopping the others" in (tmp_path / "w.log").read_text()
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in lanes), "lanes to exit")


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["worker", "beat"])
def test_a_worker_or_beat_on_an_unmigrated_database_refuses_to_start(
    command: str, settings: Settings
) -> None:
    env = worker_env(settings, MEMWORKER_DATABASE_URL=pg_empty_schema_url())
    ran = subprocess.run(
        [sys.executable, "-m", "worker", command],
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
        check=False,
    )

    assert ran.returncode == 2, ran.stderr
    assert "memworker db upgrade" in ran.stderr


def pg_empty_schema_url() -> str:
    """A PostgreSQL search path where memworker's tables do not exist."""
    from tests.conftest import PG_SERVER_URL

    return f"{PG_SERVER_URL}?options=-csearch_path%3Dmw_never_migrated"


def test_the_worker_serves_the_metrics_of_all_its_lanes_from_one_port(
    settings: Settings, store: MemoryStore, tmp_path: Path
) -> None:
    from tests.langgraph_fixtures import free_port

    port = free_port()
    env = worker_env(settings, MEMWORKER_METRICS_PORT=str(port))
    proc = start(["run", "--loglevel", "WARNING"], env, tmp_path / "run.log")
    try:
        with MemoryClient(settings) as client:
            client.enqueue(user_id=f"m-{settings.key_prefix}", trace_id="t1", text="I like tea")

        def scraped() -> str | None:
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                return None
            wanted = (
                'memworker_consolidations_total{outcome="committed"} 1.0',  # consolidate lane
                "memworker_claims_total 1.0",  # sweep lane
                'memworker_sink_deliveries_total{outcome="ok",sink="files"} 1.0',  # deliver lane
            )
            return body if all(line in body for line in wanted) else None

        wait_for(scraped, "one scrape to show the work of all three lanes")
    finally:
        stop(proc)

    assert not list(settings.data_dir.glob("metrics.*"))  # the metric files went with the lanes


#: How long after Ctrl-C a lane or beat may take when Redis fails: its own deadline,
#: plus a loaded machine's slack. Without the deadline, Celery's shutdown waits on Redis for
#: minutes: over a Unix socket kombu sets no connect timeout at all.
STOPPED_BOUND = STOP_DEADLINE_SECONDS + 25


@pytest.fixture(params=["tcp-frozen", "unix-frozen", "tcp-down"])
def failing_redis(
    request: pytest.FixtureRequest, settings: Settings, tmp_path: Path
) -> Iterator[tuple[str, Callable[[], None]]]:
    """A Redis URL and the call that breaks it. Frozen, it accepts connections and never
    answers: over TCP a proxy stops relaying, over a Unix socket (the embedded server's) the
    server process is stopped. Down, connections are refused."""
    if request.param.startswith("tcp"):
        target = urlparse(str(settings.redis_url))
        with TcpProxy(target.hostname or "127.0.0.1", target.port or 6379) as proxy:
            url = target._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
            yield url, proxy.freeze if request.param == "tcp-frozen" else proxy.stop
        return
    with embedded_redis(tmp_path / "redis", appendonly=False) as url:
        client = open_redis(url, timeout=5.0)
        pid = int(client.info("server")["process_id"])
        client.close()
        try:
            yield url, lambda: os.kill(pid, signal.SIGSTOP)
        finally:
            os.kill(pid, signal.SIGCONT)


#: A lane and beat, each run on its own, and what each logs once it is ready.
ALONE = pytest.mark.parametrize(
    ("argv", "ready"),
    [(["worker", "--lanes", "sweep"], "lane ready"), (["beat"], "holding the deployment's")],
    ids=["lane", "beat"],
)


def ctrl_c_once_broken(
    argv: list[str], ready: str, env: dict[str, str], log: Path, break_it: Callable[[], None]
) -> int:
    """Start ``argv``; once it is ready, break its dependency and Ctrl-C it: its exit status
    (TimeoutExpired past :data:`STOPPED_BOUND`)."""
    proc = start([*argv, "--loglevel", "INFO"], env, log)
    try:
        wait_for(lambda: ready in log.read_text(), f"{argv[0]} to be ready")
        break_it()
        proc.send_signal(signal.SIGINT)
        return proc.wait(timeout=STOPPED_BOUND)
    finally:
        stop(proc)


@ALONE
def test_ctrl_c_stops_a_lane_or_beat_run_on_its_own_while_redis_fails(
    argv: list[str],
    ready: str,
    failing_redis: tuple[str, Callable[[], None]],
    settings: Settings,
    store: MemoryStore,
    tmp_path: Path,
) -> None:
    url, break_redis = failing_redis
    env = worker_env(settings, MEMWORKER_REDIS_URL=url)
    log = tmp_path / "alone.log"

    code = ctrl_c_once_broken(argv, ready, env, log, break_redis)

    # Stopped by Celery's own shutdown (its calls to Redis timed out) or by its deadline.
    assert code in (0, -signal.SIGKILL), log.read_text()


@ALONE
def test_ctrl_c_stops_a_lane_or_beat_whose_rabbitmq_broker_never_answers(
    argv: list[str],
    ready: str,
    rabbitmq_vhost: str,
    settings: Settings,
    store: MemoryStore,
    tmp_path: Path,
) -> None:
    log = tmp_path / "alone.log"
    with TcpProxy("127.0.0.1", 5672) as broker:
        url = f"amqp://guest:guest@127.0.0.1:{broker.port}/{rabbitmq_vhost}"
        env = worker_env(settings, MEMWORKER_BROKER_URL=url)

        code = ctrl_c_once_broken(argv, ready, env, log, broker.freeze)

    assert code in (0, -signal.SIGKILL), log.read_text()
