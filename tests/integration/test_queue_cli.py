"""``memworker enqueue`` and ``memworker status`` from a terminal."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

import pytest
import redis
import typer
from typer.testing import CliRunner

from worker.cli.queue import register_queue
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """memworker (test app: only the queue commands)."""

    register_queue(app)
    return app


@pytest.fixture
def env(settings: Settings) -> dict[str, str]:
    return {
        "MEMWORKER_REDIS_URL": str(settings.redis_url),
        "MEMWORKER_KEY_PREFIX": settings.key_prefix,
        "MEMWORKER_QUEUE_SHARDS": str(settings.queue_shards),
        "MEMWORKER_DATA_DIR": str(settings.data_dir),
    } | ({"MEMWORKER_BROKER_URL": settings.broker_url} if settings.broker_url else {})


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


def invoke(app: typer.Typer, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def test_enqueue_prints_the_id_of_the_queued_candidate(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    code, out, _ = invoke(app, env, "enqueue", "--user", "u1", "--trace", "t-1", "I prefer tea")

    ((_, candidate),) = queue.admin.pending("user:u1")
    assert (code, out.strip()) == (0, candidate.id)
    assert (candidate.trace_id, candidate.source) == ("t-1", "cli")


def test_enqueue_without_a_trace_id_generates_and_prints_one(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    code, _, err = invoke(app, env, "enqueue", "--user", "u1", "I prefer tea")

    ((_, candidate),) = queue.admin.pending("user:u1")
    assert code == 0
    assert f"trace id: {candidate.trace_id}" in err


def test_enqueue_passes_every_option_on(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    invoke(
        app, env, "enqueue", "--user", "u1", "--assistant", "bot", "--thread", "th-1",
        "--kind", "forget", "--topic", "preferences", "--key", "preference.drink", "tea",
    )  # fmt: skip

    ((_, c),) = queue.admin.pending("user:u1:bot")
    assert (c.kind.value, c.path, c.key, c.thread_id) == (
        "forget",
        "/memories/preferences.md",
        "preference.drink",
        "th-1",
    )


def test_enqueue_passes_when_it_was_said_on(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    code, _, _ = invoke(
        app, env, "enqueue", "--user", "u1", "--occurred-at", "2025-03-01T09:30:00+01:00", "tea"
    )

    ((_, c),) = queue.admin.pending("user:u1")
    assert (code, c.occurred_at) == (0, datetime(2025, 3, 1, 8, 30, tzinfo=UTC))


def test_enqueue_refuses_an_event_time_without_an_offset(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    code, _, err = invoke(
        app, env, "enqueue", "--user", "u1", "--occurred-at", "2025-03-01T09:30:00", "tea"
    )

    assert code == 2
    assert err.startswith("error: --occurred-at '2025-03-01T09:30:00' has no UTC offset")
    assert list(queue.admin.namespaces()) == []


def test_enqueue_refuses_an_event_time_that_is_not_iso_8601(
    app: typer.Typer, env: dict[str, str]
) -> None:
    code, _, err = invoke(app, env, "enqueue", "--user", "u1", "--occurred-at", "yesterday", "x")

    assert code == 2
    assert err.startswith("error: --occurred-at 'yesterday' is not an ISO 8601 time")


def test_enqueue_with_an_org_queues_for_the_user_of_that_org_alone(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    code, _, _ = invoke(app, env, "enqueue", "--user", "u1", "--org", "acme", "I prefer tea")

    ((_, candidate),) = queue.admin.pending("org:acme:user:u1")
    assert (code, candidate.user_id) == (0, "u1")
    assert queue.admin.pending("user:u1") == []


def test_enqueue_with_an_invalid_id_prints_one_line_and_exits_2(
    app: typer.Typer, env: dict[str, str]
) -> None:
    code, _, err = invoke(app, env, "enqueue", "--user", "../root", "x")

    assert code == 2
    assert err.startswith("error: user_id '../root' has characters outside")
    assert "Traceback" not in err


def test_enqueue_with_redis_down_says_so_without_a_traceback(
    app: typer.Typer, env: dict[str, str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    code, _, err = invoke(
        app,
        {**env, "MEMWORKER_REDIS_URL": f"redis://127.0.0.1:{port}/0"},
        "enqueue",
        "--user",
        "u1",
        "x",
    )

    assert code != 0
    assert "is unreachable" in err
    assert "Traceback" not in err


def test_a_bad_setting_is_reported_as_a_configuration_error(
    app: typer.Typer, env: dict[str, str]
) -> None:
    code, _, err = invoke(app, {**env, "MEMWORKER_QUEUE_SHARDS": "0"}, "status")

    assert code == 2
    assert "MEMWORKER_QUEUE_SHARDS" in err


def test_status_json_reports_pending_candidates_per_scope(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    invoke(app, env, "enqueue", "--user", "u1", "one")
    invoke(app, env, "enqueue", "--user", "u2", "two")
    invoke(app, env, "enqueue", "--user", "u1", "--scope", "agent", "--assistant", "bot", "three")

    code, out, _ = invoke(app, env, "status", "--json")

    stats = json.loads(out)
    assert code == 0
    assert (stats["user"]["pending"], stats["agent"]["pending"], stats["total"]["pending"]) == (
        2,
        1,
        3,
    )
    assert stats["total"]["waiting"] == 3


def test_status_prints_a_table_with_a_total_row(
    app: typer.Typer, env: dict[str, str], queue: RedisQueue
) -> None:
    invoke(app, env, "enqueue", "--user", "u1", "one")

    code, out, _ = invoke(app, env, "status")

    assert code == 0
    assert "oldest pending" in out
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines()]
    assert [row[:6] for row in rows if row and row[0] in ("user", "total")] == [
        ["user", "1", "1", "0", "0", "0"],
        ["total", "1", "1", "0", "0", "0"],
    ]
