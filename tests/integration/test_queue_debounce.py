"""Debouncing: when a namespace becomes due, and what one claim takes."""

from __future__ import annotations

import pytest
import redis

from worker.models import Candidate, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0 = 1_700_000_000.0  # debounce 30 s, max wait 300 s (the settings fixture)


def candidate(user: str = "u1", text: str = "I prefer tea", **kw: str) -> Candidate:
    return make_candidate(user_id=user, trace_id="trace-1", text=text, **kw)


def make_queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


def test_namespace_is_due_after_the_quiet_period(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate(), now=T0)

    assert [c.namespace for c in queue.claim_due(now=T0 + 30)] == ["user:u1"]


def test_claim_before_due_returns_nothing(redis_client: redis.Redis, settings: Settings) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate(), now=T0)

    assert queue.claim_due(now=T0 + 29.999) == []


def test_each_arrival_extends_the_quiet_period(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate(text="one"), now=T0)
    queue.enqueue(candidate(text="two"), now=T0 + 20)

    assert queue.claim_due(now=T0 + 49) == []
    assert [c.count for c in queue.claim_due(now=T0 + 50)] == [2]


def test_max_wait_caps_debouncing_of_a_chatty_namespace(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    for i in range(0, 320, 20):  # never 30 s quiet
        queue.enqueue(candidate(text=f"turn {i}"), now=T0 + i)

    assert queue.claim_due(now=T0 + 299) == []
    assert [c.count for c in queue.claim_due(now=T0 + 300)] == [16]


def test_a_late_arrival_with_a_slow_clock_never_moves_the_due_time_earlier(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate(text="one"), now=T0 + 10)
    queue.enqueue(candidate(text="two"), now=T0)  # a client whose clock lags

    assert queue.claim_due(now=T0 + 39) == []
    assert len(queue.claim_due(now=T0 + 40)) == 1


def test_stream_ids_keep_increasing_when_a_client_clock_lags(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    first = queue.enqueue(candidate(text="one"), now=T0 + 10)
    second = queue.enqueue(candidate(text="two"), now=T0)

    assert (first, second) == ("1700000010000-0", "1700000010000-1")


def test_two_users_never_share_a_batch(redis_client: redis.Redis, settings: Settings) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate("alice", "Alice likes tea"), now=T0)
    queue.enqueue(candidate("bob", "Bob likes coffee"), now=T0)
    queue.enqueue(candidate("alice", "Alice is vegan", assistant_id="bot"), now=T0)

    claims = queue.claim_due(now=T0 + 30)
    batches = {c.namespace: [cand.text for _, cand in queue.read_batch(c)] for c in claims}

    assert batches == {
        "user:alice": ["Alice likes tea"],
        "user:bob": ["Bob likes coffee"],
        "user:alice:bot": ["Alice is vegan"],
    }


def test_read_batch_returns_candidates_in_arrival_order(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    sent = [candidate(text=f"fact {i}") for i in range(5)]
    ids = [queue.enqueue(c, now=T0 + i) for i, c in enumerate(sent)]

    (claim,) = queue.claim_due(now=T0 + 60)

    assert queue.read_batch(claim) == list(zip(ids, sent, strict=True))


def test_a_claim_covers_at_most_max_batch_candidates(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings.model_copy(update={"max_batch": 3}))
    ids = queue.enqueue_many([candidate(text=f"fact {i}") for i in range(5)], now=T0)

    (claim,) = queue.claim_due(now=T0 + 30)

    assert (claim.count, claim.covered) == (3, ids[2])
    assert [sid for sid, _ in queue.read_batch(claim)] == ids[:3]


def test_the_rest_of_a_backlog_is_due_right_after_the_ack(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings.model_copy(update={"max_batch": 3}))
    ids = queue.enqueue_many([candidate(text=f"fact {i}") for i in range(5)], now=T0)
    (claim,) = queue.claim_due(now=T0 + 30)
    queue.ack(claim, now=T0 + 31)

    (rest,) = queue.claim_due(now=T0 + 31)

    assert [sid for sid, _ in queue.read_batch(rest)] == ids[3:]


def test_claim_due_with_a_limit_claims_at_most_that_many(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue_many([candidate(f"user{i}") for i in range(10)], now=T0)

    first = queue.claim_due(now=T0 + 30, limit=4)
    rest = queue.claim_due(now=T0 + 30)

    assert len(first) == 4
    assert len(rest) == 6
    assert {c.namespace for c in first}.isdisjoint(c.namespace for c in rest)


def test_a_bounded_claim_before_anything_is_due_runs_on_no_shard(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue_many([candidate(f"user{i}") for i in range(10)], now=T0)

    assert queue.claim_due(now=T0 + 29, limit=4) == []
    # The claim script creates a shard's epoch on its first run: none ran.
    assert set(queue.admin.epochs().values()) == {None}


def test_a_bounded_claim_takes_an_expired_lease_in_a_shard_with_nothing_due(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate(), now=T0)
    (held,) = queue.claim_due(now=T0 + 30)

    (taken,) = queue.claim_due(now=T0 + 30 + settings.lease_seconds + 1, limit=1)

    assert taken.namespace == held.namespace
    assert taken.token > held.token


def test_bounded_claims_find_a_namespace_that_became_due_after_an_earlier_claim(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate("early"), now=T0)
    queue.enqueue(candidate("late"), now=T0 + 100)

    first = queue.claim_due(now=T0 + 30, limit=1)
    queue.ack(first[0], now=T0 + 31)
    second = queue.claim_due(now=T0 + 130, limit=1)

    assert [c.namespace for c in first + second] == ["user:early", "user:late"]


def test_bounded_claims_take_every_due_namespace_once(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue_many([candidate(f"user{i}") for i in range(25)], now=T0)

    taken = [c.namespace for _ in range(10) for c in queue.claim_due(now=T0 + 30, limit=3)]

    assert sorted(taken) == sorted(f"user:user{i}" for i in range(25))


def test_a_bounded_claim_on_the_servers_clock_finds_what_is_due(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    long_ago = queue.server_ms() / 1000 - settings.max_wait_seconds - 1
    queue.enqueue_many([candidate(f"user{i}") for i in range(3)], now=long_ago)

    claims = queue.claim_due(limit=2)

    assert len(claims) == 2


def test_claim_due_respects_claim_limit_per_shard(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings.model_copy(update={"claim_limit": 1}))
    queue.enqueue_many([candidate(f"user{i}") for i in range(20)], now=T0)

    claims = queue.claim_due(now=T0 + 30)

    assert len(claims) == settings.queue_shards


def test_an_acked_namespace_with_nothing_new_is_not_claimed_again(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = make_queue(redis_client, settings)
    queue.enqueue(candidate(), now=T0)
    (claim,) = queue.claim_due(now=T0 + 30)
    queue.ack(claim, now=T0 + 31)

    assert queue.claim_due(now=T0 + 10_000) == []
