"""Operators' view of the queue: reconcile now, inspect, erase, backpressure, statistics."""

from __future__ import annotations

import pytest
import redis

from worker.errors import BacklogFull, InvalidCandidate
from worker.models import Candidate, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0 = 1_700_000_000.0  # debounce 30 s, lease 60 s (the settings fixture)


def candidate(text: str = "I prefer tea", user: str = "u1", **kw: str) -> Candidate:
    return make_candidate(user_id=user, trace_id="trace-1", text=text, **kw)


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


def test_mark_due_makes_a_debouncing_namespace_claimable_now(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    assert queue.mark_due("user:u1", now=T0 + 1)
    assert [c.namespace for c in queue.claim_due(now=T0 + 1)] == ["user:u1"]


def test_mark_due_of_a_namespace_with_nothing_pending_returns_false(queue: RedisQueue) -> None:
    assert queue.mark_due("user:nobody", now=T0) is False


def test_mark_due_of_a_leased_namespace_waits_for_the_lease(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)
    queue.claim_due(now=T0 + 30)

    assert queue.mark_due("user:u1", now=T0 + 31)
    assert queue.claim_due(now=T0 + 89) == []
    assert len(queue.claim_due(now=T0 + 90)) == 1


def test_claim_namespace_claims_before_the_debounce_elapsed(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    claim = queue.claim_namespace("user:u1", now=T0 + 1)

    assert claim is not None
    assert (claim.namespace, claim.count) == ("user:u1", 1)


def test_claim_namespace_with_nothing_pending_returns_none(queue: RedisQueue) -> None:
    assert queue.claim_namespace("user:nobody", now=T0) is None


def test_claim_namespace_leaves_other_namespaces_alone(queue: RedisQueue) -> None:
    queue.enqueue(candidate(user="u1"), now=T0)
    queue.enqueue(candidate(user="u2"), now=T0)
    queue.claim_namespace("user:u1", now=T0 + 30)

    assert [c.namespace for c in queue.claim_due(now=T0 + 30)] == ["user:u2"]


def test_purge_namespace_erases_the_pending_candidates(queue: RedisQueue) -> None:
    queue.enqueue_many([candidate("one"), candidate("two")], now=T0)

    assert queue.admin.purge_namespace("user:u1") == 2
    assert queue.admin.pending("user:u1") == []
    assert queue.claim_due(now=T0 + 1000) == []


def test_purge_namespace_forgets_the_namespace(queue: RedisQueue) -> None:
    queue.enqueue(candidate(user="u1"), now=T0)
    queue.enqueue(candidate(user="u2"), now=T0)

    queue.admin.purge_namespace("user:u1")

    assert list(queue.admin.namespaces()) == ["user:u2"]


def test_purge_namespace_leaves_other_users_alone(queue: RedisQueue) -> None:
    queue.enqueue(candidate("mine", user="u1"), now=T0)
    queue.enqueue(candidate("theirs", user="u2"), now=T0)

    queue.admin.purge_namespace("user:u1")

    assert [c.text for _, c in queue.admin.pending("user:u2")] == ["theirs"]


def test_namespaces_lists_every_known_namespace_once(queue: RedisQueue) -> None:
    queue.enqueue(candidate(user="u1"), now=T0)
    queue.enqueue(candidate(user="u1"), now=T0)
    queue.enqueue(candidate(user="u1", assistant_id="bot"), now=T0)
    queue.enqueue(candidate(scope="agent", assistant_id="bot"), now=T0)

    assert sorted(queue.admin.namespaces()) == ["agent:bot", "user:u1", "user:u1:bot"]


def test_enqueue_refuses_past_the_pending_limit(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(
        redis_client, settings.model_copy(update={"max_pending_per_namespace": 2}).for_queue
    )
    queue.admin.publish_policy()
    queue.enqueue_many([candidate("one"), candidate("two")], now=T0)

    with pytest.raises(BacklogFull, match=r"user:u1 already has 2 pending candidates \(limit 2\)"):
        queue.enqueue(candidate("three"), now=T0)
    assert len(queue.admin.pending("user:u1")) == 2


def test_the_pending_limit_is_per_namespace(redis_client: redis.Redis, settings: Settings) -> None:
    queue = RedisQueue(
        redis_client, settings.model_copy(update={"max_pending_per_namespace": 1}).for_queue
    )
    queue.admin.publish_policy()
    queue.enqueue(candidate(user="u1"), now=T0)

    queue.enqueue(candidate(user="u2"), now=T0)

    assert len(queue.admin.pending("user:u2")) == 1


def test_enqueue_many_refuses_only_the_full_namespace(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(
        redis_client, settings.model_copy(update={"max_pending_per_namespace": 1}).for_queue
    )
    queue.admin.publish_policy()
    queue.enqueue(candidate(user="u1"), now=T0)

    with pytest.raises(BacklogFull):
        queue.enqueue_many([candidate(user="u1"), candidate(user="u2")], now=T0)
    assert len(queue.admin.pending("user:u2")) == 1


def test_pending_lists_candidates_oldest_first_with_a_limit(queue: RedisQueue) -> None:
    queue.enqueue_many([candidate(f"fact {i}") for i in range(5)], now=T0)

    assert [c.text for _, c in queue.admin.pending("user:u1", limit=2)] == ["fact 0", "fact 1"]


def test_stats_count_pending_candidates_per_scope(queue: RedisQueue) -> None:
    queue.enqueue_many([candidate("a"), candidate("b", user="u2")], now=T0)
    queue.enqueue(candidate(scope="agent", assistant_id="bot"), now=T0)

    stats = queue.admin.stats(now=T0)

    assert {scope: s.pending for scope, s in stats.scopes.items()} == {"agent": 1, "user": 2}


def test_stats_tell_waiting_due_leased_and_dead_namespaces_apart(queue: RedisQueue) -> None:
    queue.enqueue(candidate(user="dead"), now=T0)
    for attempt in range(3):  # max_attempts
        claim = queue.claim_namespace("user:dead", now=T0 + attempt)
        assert claim is not None
        queue.fail(claim, "boom", now=T0 + attempt)
    queue.enqueue(candidate(user="leased"), now=T0)
    queue.claim_namespace("user:leased", now=T0 + 100)
    queue.enqueue(candidate(user="due"), now=T0 + 50)
    queue.enqueue(candidate(user="waiting"), now=T0 + 90)

    user = queue.admin.stats(now=T0 + 100).scopes["user"]

    assert (user.waiting, user.due, user.leased, user.dead) == (1, 1, 1, 1)


def test_stats_report_the_age_of_the_oldest_pending_candidate(queue: RedisQueue) -> None:
    queue.enqueue(candidate(user="u1"), now=T0)
    queue.enqueue(candidate(user="u2"), now=T0 + 50)

    assert queue.admin.stats(now=T0 + 100).total.oldest_pending_age == 100.0


def test_stats_of_an_empty_queue_are_empty(queue: RedisQueue) -> None:
    stats = queue.admin.stats(now=T0)

    assert (stats.scopes, stats.total.pending, stats.total.oldest_pending_age) == ({}, 0, None)


def test_acked_candidates_leave_the_pending_count(queue: RedisQueue) -> None:
    queue.enqueue_many([candidate("a"), candidate("b")], now=T0)
    (claim,) = queue.claim_due(now=T0 + 30)
    queue.enqueue(candidate("c"), now=T0 + 31)
    queue.ack(claim, now=T0 + 32)

    assert queue.admin.stats(now=T0 + 32).total.pending == 1


def test_read_batch_refuses_an_entry_of_another_namespace(
    queue: RedisQueue, redis_client: redis.Redis
) -> None:
    queue.enqueue(candidate(user="u1"), now=T0)
    intruder = candidate("Bob's secret", user="bob")
    redis_client.xadd(queue.layout.log("user:u1"), {"c": intruder.model_dump_json(), "i": "x"})
    claim = queue.claim_namespace("user:u1", now=T0 + 1)
    assert claim is not None

    with pytest.raises(InvalidCandidate, match="belongs to user:bob; refusing the batch"):
        queue.read_batch(claim)


def test_read_batch_names_a_corrupt_entry_by_its_stream_id(
    queue: RedisQueue, redis_client: redis.Redis
) -> None:
    queue.enqueue(candidate(user="u1"), now=T0)
    sid = redis_client.xadd(queue.layout.log("user:u1"), {"c": "{not json", "i": "x"})
    claim = queue.claim_namespace("user:u1", now=T0 + 1)
    assert claim is not None

    with pytest.raises(
        InvalidCandidate, match=f"log entry {sid.decode()} is not a valid candidate"
    ):
        queue.read_batch(claim)
