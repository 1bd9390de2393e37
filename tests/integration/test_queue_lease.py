"""Leases: one batch in flight per namespace, fenced tokens, heartbeats, crash recovery."""

from __future__ import annotations

import pytest
import redis

from worker.models import Candidate, make_candidate
from worker.queue.redis_queue import Claim, RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0 = 1_700_000_000.0  # debounce 30 s, max wait 300 s, lease 60 s (the settings fixture)
DUE = T0 + 30


def candidate(text: str = "I prefer tea", user: str = "u1") -> Candidate:
    return make_candidate(user_id=user, trace_id="trace-1", text=text)


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


def claimed(queue: RedisQueue, *texts: str) -> Claim:
    for text in texts or ("I prefer tea",):
        queue.enqueue(candidate(text), now=T0)
    (claim,) = queue.claim_due(now=DUE)
    return claim


def texts(queue: RedisQueue, namespace: str = "user:u1") -> list[str]:
    return [c.text for _, c in queue.admin.pending(namespace)]


def test_a_claimed_namespace_is_not_claimed_again_while_leased(queue: RedisQueue) -> None:
    claimed(queue)
    queue.mark_due("user:u1", now=DUE + 1)

    assert queue.claim_due(now=DUE + 59) == []


def test_an_ack_clears_a_parked_due_time_so_new_arrivals_debounce_normally(
    queue: RedisQueue,
) -> None:
    claim = claimed(queue)
    queue.mark_due("user:u1", now=DUE + 1)
    queue.claim_due(now=DUE + 2)  # parks it
    queue.ack(claim, now=DUE + 3)
    queue.enqueue(candidate("newer"), now=DUE + 4)

    assert queue.claim_due(now=DUE + 4 + 29) == []
    assert [c.count for c in queue.claim_due(now=DUE + 4 + 30)] == [1]


def test_claim_namespace_of_a_leased_namespace_returns_none(queue: RedisQueue) -> None:
    claimed(queue)

    assert queue.claim_namespace("user:u1", now=DUE + 1) is None


def test_an_expired_lease_is_reclaimed_with_a_higher_token(queue: RedisQueue) -> None:
    first = claimed(queue)

    (second,) = queue.claim_due(now=DUE + 60)

    assert second.token > first.token
    assert (second.covered, second.count) == (first.covered, first.count)


def test_reclaiming_an_expired_lease_counts_a_failed_attempt(queue: RedisQueue) -> None:
    claimed(queue)

    (second,) = queue.claim_due(now=DUE + 60)

    assert second.attempts == 1


def test_the_lease_holds_until_its_expiry(queue: RedisQueue) -> None:
    claimed(queue)

    assert queue.claim_due(now=DUE + 59.999) == []


def test_a_heartbeat_keeps_the_lease_past_its_first_expiry(queue: RedisQueue) -> None:
    claim = claimed(queue)

    assert queue.extend(claim, now=DUE + 50)
    assert queue.claim_due(now=DUE + 100) == []
    assert len(queue.claim_due(now=DUE + 110)) == 1


def test_a_stale_token_cannot_extend_the_new_lease(queue: RedisQueue) -> None:
    old = claimed(queue)
    queue.claim_due(now=DUE + 60)

    assert queue.extend(old, now=DUE + 61) is False


def test_a_stale_ack_is_refused_and_removes_nothing(queue: RedisQueue) -> None:
    old = claimed(queue, "one", "two")
    queue.claim_due(now=DUE + 60)

    assert queue.ack(old, now=DUE + 61) is False
    assert texts(queue) == ["one", "two"]


def test_the_new_holder_can_ack_after_a_takeover(queue: RedisQueue) -> None:
    claimed(queue, "one", "two")
    (new,) = queue.claim_due(now=DUE + 60)

    assert queue.ack(new, now=DUE + 61)
    assert texts(queue) == []


def test_ack_removes_the_covered_candidates(queue: RedisQueue) -> None:
    claim = claimed(queue, "one", "two")

    assert queue.ack(claim, now=DUE + 1)
    assert texts(queue) == []


def test_ack_twice_is_refused_the_second_time(queue: RedisQueue) -> None:
    claim = claimed(queue)
    queue.ack(claim, now=DUE + 1)

    assert queue.ack(claim, now=DUE + 2) is False


def test_candidates_arriving_during_a_lease_survive_the_ack(queue: RedisQueue) -> None:
    claim = claimed(queue, "one")
    queue.enqueue(candidate("two"), now=DUE + 10)

    queue.ack(claim, now=DUE + 20)

    assert texts(queue) == ["two"]


def test_candidates_arriving_during_a_lease_rearm_their_own_due_time(queue: RedisQueue) -> None:
    claim = claimed(queue, "one")
    queue.enqueue(candidate("two"), now=DUE + 10)
    queue.ack(claim, now=DUE + 20)

    assert queue.claim_due(now=DUE + 10 + 29) == []
    (nxt,) = queue.claim_due(now=DUE + 10 + 30)
    assert [c.text for _, c in queue.read_batch(nxt)] == ["two"]


def test_arrivals_during_a_lease_are_due_at_once_when_their_max_wait_passed(
    queue: RedisQueue,
) -> None:
    claim = claimed(queue, "one")
    for i in range(10, 400, 20):  # keeps arriving during a long, heartbeated lease
        queue.enqueue(candidate(f"turn {i}"), now=DUE + i)
        queue.extend(claim, now=DUE + i)
    queue.ack(claim, now=DUE + 400)

    assert len(queue.claim_due(now=DUE + 400)) == 1


def test_release_makes_the_batch_due_at_once_without_counting_an_attempt(
    queue: RedisQueue,
) -> None:
    claim = claimed(queue, "one")

    assert queue.release(claim, now=DUE + 1)
    (again,) = queue.claim_due(now=DUE + 1)
    assert (again.attempts, again.count) == (0, 1)


def test_release_with_a_stale_token_is_refused(queue: RedisQueue) -> None:
    old = claimed(queue)
    queue.claim_due(now=DUE + 60)

    assert queue.release(old, now=DUE + 61) is False


def test_fail_with_a_stale_token_is_reported_stale(queue: RedisQueue) -> None:
    old = claimed(queue)
    queue.claim_due(now=DUE + 60)

    assert queue.fail(old, "boom", now=DUE + 61) == "stale"


def test_purge_while_leased_makes_the_holders_ack_stale(queue: RedisQueue) -> None:
    claim = claimed(queue)
    queue.admin.purge_namespace("user:u1")

    assert queue.ack(claim, now=DUE + 1) is False


# --- when a claimed namespace became claimable (the due lag's start) ---------------------------


def test_a_debounced_claim_carries_its_due_time(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    (claim,) = queue.claim_due(now=DUE + 7)

    assert claim.due_at_ms == DUE * 1000


def test_a_debounced_claim_with_a_claim_limit_carries_its_due_time(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    (claim,) = queue.claim_due(now=DUE + 7, limit=1)

    assert claim.due_at_ms == DUE * 1000


def test_a_claim_of_a_namespace_due_at_its_max_wait_carries_that_time(queue: RedisQueue) -> None:
    for i in range(0, 320, 20):  # arrivals every 20 s keep the quiet period from passing
        queue.enqueue(candidate(f"turn {i}"), now=T0 + i)

    (claim,) = queue.claim_due(now=T0 + 330)

    assert claim.due_at_ms == (T0 + 300) * 1000


def test_a_takeover_of_an_expired_lease_carries_the_leases_expiry(queue: RedisQueue) -> None:
    claimed(queue)  # leased at DUE for 60 s

    (second,) = queue.claim_due(now=DUE + 75)

    assert second.due_at_ms == (DUE + 60) * 1000


def test_a_released_batch_is_due_from_its_release(queue: RedisQueue) -> None:
    claim = claimed(queue)
    queue.release(claim, now=DUE + 5)

    (again,) = queue.claim_due(now=DUE + 9)

    assert again.due_at_ms == (DUE + 5) * 1000


def test_a_named_claim_before_the_due_time_carries_the_claim_time(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    claim = queue.claim_namespace("user:u1", now=T0 + 5)

    assert claim is not None
    assert claim.due_at_ms == (T0 + 5) * 1000


def test_a_named_claim_after_the_due_time_carries_the_due_time(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    claim = queue.claim_namespace("user:u1", now=DUE + 4)

    assert claim is not None
    assert claim.due_at_ms == DUE * 1000


def test_a_named_claim_of_an_expired_lease_carries_the_leases_expiry(queue: RedisQueue) -> None:
    claimed(queue)

    claim = queue.claim_namespace("user:u1", now=DUE + 61)

    assert claim is not None
    assert claim.due_at_ms == (DUE + 60) * 1000
