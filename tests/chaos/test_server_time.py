"""The Redis server's clock and the deployment's policy decide the queue, never a client's.

Chat hosts run the real hot-path client in a process under ``faketime``, a day ahead or
behind; the worker side sends no clock either (every script reads Redis ``TIME``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

import redis

from tests.support.memory_queue import LOADED_MACHINE_SECONDS
from tests.support.skewed import skewed_enqueue
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.client import MemoryClient
from worker.queue.redis_queue import RedisQueue, arrived
from worker.queue.scripts import server_ms
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.types import Outcome

DAY_MS: Final = 86_400_000
#: The deployment's policy in these tests (a client's defaults are 30 s and 300 s).
QUIET_MS: Final = 6_000
MAX_WAIT_MS: Final = 12_000
#: Real time that may pass between the enqueue and the test's read of the server's clock.
SLACK_MS: Final = 5_000


def _deploy(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    """The worker side, having written the deployment's policy at start."""
    policy = {"debounce_seconds": QUIET_MS / 1000, "max_wait_seconds": MAX_WAIT_MS / 1000}
    queue = RedisQueue(redis_client, settings.model_copy(update=policy).for_queue)
    queue.admin.publish_policy()
    return queue


def _due_ms(queue: RedisQueue, namespace: str) -> float:
    score = queue.redis.zscore(queue.layout.due(queue.layout.shard(namespace)), namespace)
    assert score is not None
    return float(score)


def _fact(text: str, **extra: str) -> dict[str, str]:
    return {"user_id": "u1", "trace_id": "t1", "text": text, **extra}


def test_a_client_a_day_fast_cannot_push_the_due_time_out(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = _deploy(redis_client, settings)
    believed, _ = skewed_enqueue("+1d", settings, [_fact("I prefer tea")])
    now = server_ms(redis_client.time())

    assert believed * 1000 - now > DAY_MS - SLACK_MS  # the client really was a day ahead
    assert now <= _due_ms(queue, "user:u1") <= now + QUIET_MS


def test_a_client_a_day_slow_cannot_skip_the_debounce(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = _deploy(redis_client, settings)
    believed, _ = skewed_enqueue("-1d", settings, [_fact("I prefer tea")])
    now = server_ms(redis_client.time())

    assert now - believed * 1000 > DAY_MS - SLACK_MS  # the client really was a day behind
    assert _due_ms(queue, "user:u1") >= now + QUIET_MS - SLACK_MS
    assert queue.claim_due() == []  # not due yet: the debounce holds


def test_max_wait_counts_from_the_servers_arrival_of_a_fast_clients_candidate(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = _deploy(redis_client, settings)
    skewed_enqueue("+1d", settings, [_fact("I prefer tea")])
    first = int(queue.admin.pending("user:u1")[0][0].split("-")[0])

    # Another arrival 10 s later by the server's clock (the `now` hook stands in for waiting).
    later = make_candidate(user_id="u1", trace_id="t2", text="I like green tea")
    queue.enqueue(later, now=(first + 10_000) / 1000)

    assert _due_ms(queue, "user:u1") == first + MAX_WAIT_MS


def test_stream_ids_are_the_servers_arrival_times_whatever_the_clients_clock(
    redis_client: redis.Redis, settings: Settings, queue: RedisQueue
) -> None:
    skewed_enqueue("+1d", settings, [_fact("one")])
    skewed_enqueue("-1d", settings, [_fact("two")])
    now = server_ms(redis_client.time())

    pending = queue.admin.pending("user:u1")
    assert [c.text for _, c in pending] == ["one", "two"]
    assert all(now - SLACK_MS <= int(sid.split("-")[0]) <= now for sid, _ in pending)


def test_a_client_built_with_other_settings_cannot_change_the_deployments_debounce(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = _deploy(redis_client, settings)
    with MemoryClient.from_url(
        settings.redis_url or "",
        key_prefix=settings.key_prefix,
        queue_shards=settings.queue_shards,
        debounce_seconds=3600,
        max_wait_seconds=7200,
        socket_timeout_seconds=LOADED_MACHINE_SECONDS,
    ) as client:
        client.enqueue(**_fact("I prefer tea"))  # type: ignore[arg-type]
    now = server_ms(redis_client.time())

    assert now <= _due_ms(queue, "user:u1") <= now + QUIET_MS


def test_the_oldest_pending_age_is_measured_on_the_servers_clock(
    settings: Settings, queue: RedisQueue
) -> None:
    skewed_enqueue("-1d", settings, [_fact("I prefer tea")])

    age = queue.admin.stats().scopes["user"].oldest_pending_age

    assert age is not None
    assert 0 <= age < SLACK_MS / 1000


def test_a_keyed_update_from_a_slow_host_after_one_from_a_fast_host_wins_by_arrival(
    settings: Settings, queue: RedisQueue, sqlite_store: MemoryStore
) -> None:
    slot = {"key": "preference.drink", "topic": "preferences"}
    skewed_enqueue("+1d", settings, [_fact("I prefer tea", **slot)])
    skewed_enqueue("-1d", settings, [_fact("I prefer coffee", **slot)])
    claim = queue.claim_namespace("user:u1")
    assert claim is not None

    result = Pipeline(
        queue, sqlite_store, RulesConsolidator(), settings.for_consolidation
    ).consolidate(claim)

    assert result.outcome is Outcome.COMMITTED
    assert [e.text for e in sqlite_store.load_state("user:u1").entries] == ["I prefer coffee"]


def test_before_any_worker_wrote_the_policy_the_settings_defaults_apply(
    queue: RedisQueue,
) -> None:
    defaults = Settings.model_fields
    at = 1_700_000_000.0

    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="I prefer tea"), now=at)

    quiet_ms = float(defaults["debounce_seconds"].default) * 1000
    assert _due_ms(queue, "user:u1") == at * 1000 + quiet_ms


def test_an_event_time_after_the_servers_arrival_counts_as_said_on_arrival(
    queue: RedisQueue,
) -> None:
    ahead = datetime.now(UTC) + timedelta(days=1)  # a host a day fast, saying "just now"
    queue.enqueue(
        make_candidate(user_id="u1", trace_id="t", text="x", now=ahead, occurred_at=ahead)
    )

    (candidate,) = arrived(queue.admin.pending("user:u1"))

    assert candidate.occurred_at == candidate.created_at
    assert candidate.said_at <= datetime.now(UTC)


def test_an_event_time_before_the_servers_arrival_is_kept(queue: RedisQueue) -> None:
    said = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="x", occurred_at=said))

    (candidate,) = arrived(queue.admin.pending("user:u1"))

    assert candidate.said_at == said
