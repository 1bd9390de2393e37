"""A Redis that lost its data is detected, and never makes a new candidate look already merged.

A private redis-server (no persistence) is restarted empty, or flushed, after a commit whose
position lies in the future (a server clock that ran ahead, or, before server time, a chat host
a day fast). Candidates enqueued afterwards get lower stream ids; positions are only compared
within one epoch, so the unique ledger alone decides, and every one of them is merged once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from tests.support.private_redis import PrivateRedis, private_redis
from tests.support.skewed import skewed_enqueue
from worker import metrics
from worker.cli.app import app
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.store.schema import candidate_ledger
from worker.types import Outcome

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

NS: Final = "user:u1"
DAY: Final = 86_400.0
AFTER: Final = 5


@pytest.fixture
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    with private_redis(tmp_path_factory.mktemp("ep")) as s:
        yield s


@pytest.fixture
def deployment(
    server: PrivateRedis, tmp_path: Path
) -> Iterator[tuple[Settings, RedisQueue, MemoryStore]]:
    settings = Settings(
        redis_url=server.url,
        database_url=f"sqlite:///{tmp_path / 'm.sqlite3'}",
        data_dir=tmp_path / "data",
        key_prefix="ep",
        queue_shards=4,
    )
    client = server.client()
    store = MemoryStore.from_url(settings.effective_database_url, create=True)
    yield settings, RedisQueue(client, settings.for_queue), store
    store.dispose()
    client.close()


def _merge(queue: RedisQueue, store: MemoryStore, settings: Settings, now: float | None = None):  # type: ignore[no-untyped-def]
    claim = queue.claim_namespace(NS, now=now)
    assert claim is not None
    return Pipeline(queue, store, RulesConsolidator(), settings.for_consolidation).consolidate(
        claim
    )


def _commit_from_the_future(queue: RedisQueue, store: MemoryStore, settings: Settings) -> None:
    """A committed batch whose position is a day ahead of the server's clock."""
    ahead = time.time() + DAY
    queue.enqueue(make_candidate(user_id="u1", trace_id="t0", text="I prefer tea"), now=ahead)
    assert _merge(queue, store, settings, now=ahead).outcome is Outcome.COMMITTED


def _enqueue_after(queue: RedisQueue) -> list[str]:
    ids = []
    for i in range(AFTER):
        c = make_candidate(
            user_id="u1", trace_id=f"t{i}", text=f"Remember that fact number {i} holds"
        )
        queue.enqueue(c)
        ids.append(c.id)
    return ids


def _ledger_counts(store: MemoryStore, ids: list[str]) -> list[int]:
    with store.engine.connect() as conn:
        return [
            int(
                conn.execute(
                    sa.select(sa.func.count()).where(candidate_ledger.c.candidate_id == i)
                ).scalar_one()
            )
            for i in ids
        ]


def _status(settings: Settings) -> dict[str, object]:
    env = {
        "MEMWORKER_REDIS_URL": settings.redis_url or "",
        "MEMWORKER_DATABASE_URL": settings.database_url or "",
        "MEMWORKER_KEY_PREFIX": settings.key_prefix,
        "MEMWORKER_QUEUE_SHARDS": str(settings.queue_shards),
        "MEMWORKER_DATA_DIR": str(settings.data_dir),
    }
    ran = CliRunner().invoke(app, ["status", "--json"], env=env)
    assert ran.exit_code == 0, ran.output
    return json.loads(ran.stdout)["redis"]  # type: ignore[no-any-return]


def test_candidates_enqueued_after_redis_restarted_empty_are_each_merged_once(
    server: PrivateRedis, deployment: tuple[Settings, RedisQueue, MemoryStore]
) -> None:
    settings, queue, store = deployment
    _commit_from_the_future(queue, store, settings)
    server.stop()
    server.start()  # no AOF: Redis comes back empty

    ids = _enqueue_after(queue)
    result = _merge(queue, store, settings)

    assert result.outcome is Outcome.COMMITTED
    assert result.candidates == AFTER
    assert _ledger_counts(store, ids) == [1] * AFTER


def test_candidates_enqueued_after_a_flushall_are_each_merged_once(
    server: PrivateRedis, deployment: tuple[Settings, RedisQueue, MemoryStore]
) -> None:
    settings, queue, store = deployment
    _commit_from_the_future(queue, store, settings)
    queue.redis.flushall()

    ids = _enqueue_after(queue)
    result = _merge(queue, store, settings)

    assert result.candidates == AFTER
    assert _ledger_counts(store, ids) == [1] * AFTER


def test_an_epoch_change_is_counted_and_logged_once_at_error(
    server: PrivateRedis,
    deployment: tuple[Settings, RedisQueue, MemoryStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings, queue, store = deployment
    _commit_from_the_future(queue, store, settings)
    server.stop()
    server.start()
    before = metrics.QUEUE_EPOCH_CHANGES._value.get()

    with caplog.at_level(logging.ERROR, logger="worker.service.consolidate"):
        _enqueue_after(queue)
        _merge(queue, store, settings)

    assert metrics.QUEUE_EPOCH_CHANGES._value.get() == before + 1
    errors = [r.getMessage() for r in caplog.records if "queue epoch changed" in r.getMessage()]
    assert len(errors) == 1
    assert "Redis lost its data" in errors[0]


def test_status_shows_the_epoch_change_until_the_namespaces_are_committed_again(
    server: PrivateRedis, deployment: tuple[Settings, RedisQueue, MemoryStore]
) -> None:
    settings, queue, store = deployment
    _commit_from_the_future(queue, store, settings)
    assert _status(settings)["epoch"] == {"changed": False, "namespaces_from_an_earlier_epoch": 0}
    server.stop()
    server.start()

    shown = _status(settings)["epoch"]

    assert shown["changed"] is True  # type: ignore[index]
    assert shown["namespaces_from_an_earlier_epoch"] == 1  # type: ignore[index]
    assert "Redis lost its data" in shown["meaning"]  # type: ignore[index]


def test_a_fast_clients_commit_then_a_restart_loses_nothing_enqueued_afterwards(
    server: PrivateRedis, deployment: tuple[Settings, RedisQueue, MemoryStore]
) -> None:
    settings, queue, store = deployment
    skewed_enqueue("+1d", settings, [{"user_id": "u1", "trace_id": "t", "text": "I prefer tea"}])
    assert _merge(queue, store, settings).outcome is Outcome.COMMITTED
    server.stop()
    server.start()

    ids = _enqueue_after(queue)
    _merge(queue, store, settings)

    assert _ledger_counts(store, ids) == [1] * AFTER


def test_a_redis_that_answers_after_a_restart_is_a_different_epoch(
    server: PrivateRedis, deployment: tuple[Settings, RedisQueue, MemoryStore]
) -> None:
    _, queue, _ = deployment
    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="x"))
    first = queue.claim_namespace(NS)
    server.stop()
    server.start()
    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="y"))

    second = queue.claim_namespace(NS)

    assert first is not None
    assert second is not None
    assert first.epoch != second.epoch
    assert second.token > first.token  # the fence restarts above every earlier token
