"""Failures: retries with backoff, the dead-letter set, and operators bringing batches back."""

from __future__ import annotations

import pytest
import redis

from worker.errors import NotFound
from worker.models import Candidate, make_candidate
from worker.queue.redis_queue import Claim, RedisQueue
from worker.settings import Settings

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0 = 1_700_000_000.0  # debounce 30 s, lease 60 s, max attempts 3, backoff 5 s (settings fixture)
DUE = T0 + 30


def candidate(text: str = "I prefer tea", user: str = "u1") -> Candidate:
    return make_candidate(user_id=user, trace_id="trace-1", text=text)


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


def claim_at(queue: RedisQueue, now: float) -> Claim:
    (claim,) = queue.claim_due(now=now)
    return claim


def fail_until_dead(queue: RedisQueue) -> float:
    """Fail the u1 batch max_attempts (3) times; returns the time of the last failure."""
    queue.enqueue(candidate(), now=T0)
    queue.fail(claim_at(queue, DUE), "boom 1", now=DUE)
    queue.fail(claim_at(queue, DUE + 5), "boom 2", now=DUE + 5)
    assert queue.fail(claim_at(queue, DUE + 15), "boom 3", now=DUE + 15) == "dead"
    return DUE + 15


def test_a_failed_batch_is_retried_after_the_backoff(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    assert queue.fail(claim_at(queue, DUE), "model timed out", now=DUE) == "retry"
    assert queue.claim_due(now=DUE + 4.999) == []
    assert claim_at(queue, DUE + 5).attempts == 1


def test_the_backoff_doubles_with_each_attempt(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)
    queue.fail(claim_at(queue, DUE), "boom", now=DUE)
    queue.fail(claim_at(queue, DUE + 5), "boom", now=DUE + 5)

    assert queue.claim_due(now=DUE + 5 + 9.999) == []
    assert claim_at(queue, DUE + 15).attempts == 2


def test_the_backoff_is_capped_at_an_hour(redis_client: redis.Redis, settings: Settings) -> None:
    queue = RedisQueue(
        redis_client,
        settings.model_copy(update={"retry_backoff_seconds": 3000, "max_attempts": 9}).for_queue,
    )
    queue.enqueue(candidate(), now=T0)
    queue.fail(claim_at(queue, DUE), "boom", now=DUE)
    queue.fail(claim_at(queue, DUE + 3000), "boom", now=DUE + 3000)  # next delay 6000 s → 3600 s

    assert len(queue.claim_due(now=DUE + 3000 + 3600)) == 1


def test_a_batch_is_dead_lettered_after_max_attempts(queue: RedisQueue) -> None:
    fail_until_dead(queue)

    (dead,) = queue.admin.dead_letters()
    assert (dead.namespace, dead.attempts, dead.last_error, dead.pending) == (
        "user:u1",
        3,
        "boom 3",
        1,
    )


def test_a_dead_lettered_batch_keeps_its_candidates(queue: RedisQueue) -> None:
    fail_until_dead(queue)

    assert [c.text for _, c in queue.admin.pending("user:u1")] == ["I prefer tea"]


def test_a_dead_lettered_namespace_is_not_claimed_even_when_new_candidates_arrive(
    queue: RedisQueue,
) -> None:
    t = fail_until_dead(queue)
    queue.enqueue(candidate("newer"), now=t + 1)

    assert queue.claim_due(now=t + 10_000) == []
    assert queue.claim_namespace("user:u1", now=t + 10_000) is None
    assert [c.text for _, c in queue.admin.pending("user:u1")] == ["I prefer tea", "newer"]


def test_a_batch_that_keeps_killing_its_workers_ends_dead_lettered(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)
    claim_at(queue, DUE)  # each holder dies without a word: the lease just expires
    claim_at(queue, DUE + 60)
    claim_at(queue, DUE + 120)

    assert queue.claim_due(now=DUE + 180) == []
    (dead,) = queue.admin.dead_letters()
    assert dead.last_error is not None
    assert "lease expired" in dead.last_error


def test_an_ack_resets_the_attempt_count(queue: RedisQueue) -> None:
    queue.enqueue(candidate("one"), now=T0)
    queue.fail(claim_at(queue, DUE), "boom", now=DUE)
    queue.enqueue(candidate("two"), now=DUE + 1)
    queue.ack(claim_at(queue, DUE + 5 + 30), now=DUE + 40)
    queue.enqueue(candidate("three"), now=DUE + 50)

    assert claim_at(queue, DUE + 80).attempts == 0


def test_retry_dead_makes_the_namespace_due_now_with_fresh_attempts(queue: RedisQueue) -> None:
    t = fail_until_dead(queue)

    assert queue.admin.retry_dead("user:u1", now=t + 100)
    claim = claim_at(queue, t + 100)
    assert (claim.attempts, queue.admin.dead_letters()) == (0, [])


def test_retry_dead_of_a_healthy_namespace_returns_false(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    assert queue.admin.retry_dead("user:u1", now=T0) is False


def test_drop_dead_deletes_the_pending_candidates(queue: RedisQueue) -> None:
    fail_until_dead(queue)

    assert queue.admin.drop_dead("user:u1") == 1
    assert (queue.admin.pending("user:u1"), queue.admin.dead_letters()) == ([], [])


def test_drop_dead_adjusts_the_pending_count(queue: RedisQueue) -> None:
    t = fail_until_dead(queue)
    queue.admin.drop_dead("user:u1")

    assert queue.admin.stats(now=t).total.pending == 0


def test_drop_dead_of_a_healthy_namespace_is_refused(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)

    with pytest.raises(NotFound, match="not dead-lettered"):
        queue.admin.drop_dead("user:u1")
    assert len(queue.admin.pending("user:u1")) == 1


def test_after_drop_dead_new_candidates_debounce_normally(queue: RedisQueue) -> None:
    t = fail_until_dead(queue)
    queue.admin.drop_dead("user:u1")
    queue.enqueue(candidate("fresh start"), now=t + 1)

    claim = claim_at(queue, t + 31)
    assert [c.text for _, c in queue.read_batch(claim)] == ["fresh start"]
    assert claim.attempts == 0


def test_tokens_keep_increasing_after_a_drop(queue: RedisQueue) -> None:
    queue.enqueue(candidate(), now=T0)
    before = claim_at(queue, DUE)
    queue.fail(before, "boom", now=DUE)
    queue.fail(claim_at(queue, DUE + 5), "boom", now=DUE + 5)
    queue.fail(claim_at(queue, DUE + 15), "boom", now=DUE + 15)
    queue.admin.drop_dead("user:u1")
    queue.enqueue(candidate(), now=DUE + 20)

    assert claim_at(queue, DUE + 50).token > before.token
