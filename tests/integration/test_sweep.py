"""Sweep: every due namespace is claimed once and becomes exactly one dispatched task."""

from __future__ import annotations

import dataclasses
import time

import redis

from worker.models import make_candidate
from worker.queue.redis_queue import Claim, RedisQueue, sweep_due
from worker.runtime.celery import consolidation_task_id
from worker.service.sweep import drain
from worker.settings import Settings


def enqueue_for(queue: RedisQueue, users: list[str], now: float) -> None:
    for user in users:
        queue.enqueue(make_candidate(user_id=user, trace_id="t", text=f"{user} likes tea"), now=now)


def test_sweep_dispatches_exactly_one_task_per_claimed_namespace(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    now = time.time()
    enqueue_for(queue, ["a", "b", "c"], now)
    dispatched: list[Claim] = []
    due = now + settings.debounce_seconds + 1
    sweep_due(queue, dispatched.append, now=due)
    sweep_due(queue, dispatched.append, now=due)  # a second beat while they are leased
    assert sorted(c.namespace for c in dispatched) == ["user:a", "user:b", "user:c"]
    assert len({consolidation_task_id(c) for c in dispatched}) == 3


def test_a_sweep_before_the_quiet_period_dispatches_nothing(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    now = time.time()
    enqueue_for(queue, ["a"], now)
    dispatched: list[Claim] = []
    sweep_due(queue, dispatched.append, now=now + settings.debounce_seconds / 2)
    assert dispatched == []


def test_a_claim_that_cannot_be_dispatched_is_released_for_the_next_sweep(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    now = time.time()
    enqueue_for(queue, ["a"], now)
    due = now + settings.debounce_seconds + 1

    def broker_down(claim: Claim) -> None:
        raise ConnectionError("broker unreachable")

    assert sweep_due(queue, broker_down, now=due) == []
    retried: list[Claim] = []
    sweep_due(queue, retried.append, now=due + 1)
    assert [c.namespace for c in retried] == ["user:a"]


def test_the_task_id_of_a_claim_is_deterministic() -> None:
    claim = Claim(namespace="user:a", token=7, covered="1-0", count=1, attempts=0)
    assert consolidation_task_id(claim) == consolidation_task_id(claim)
    assert consolidation_task_id(claim) != consolidation_task_id(
        Claim(namespace="user:a", token=8, covered="1-0", count=1, attempts=0)
    )


def test_a_dispatched_claim_survives_the_task_round_trip_with_its_due_time(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    now = 1_700_000_000.0
    enqueue_for(queue, ["a"], now)
    dispatched: list[Claim] = []
    sweep_due(queue, dispatched.append, now=now + settings.debounce_seconds + 1)

    (claim,) = dispatched
    assert Claim(**dataclasses.asdict(claim)) == claim  # as the consolidate task rebuilds it
    assert claim.due_at_ms == (now + settings.debounce_seconds) * 1000


def test_a_claim_serialised_by_an_older_release_loads_without_a_due_time() -> None:
    fields = {"namespace": "user:a", "token": 7, "covered": "1-0", "count": 1, "attempts": 0}

    assert Claim(**fields).due_at_ms is None  # type: ignore[arg-type]


def test_draining_the_user_scope_makes_a_user_of_an_org_due_and_leaves_the_orgs_memory(
    queue: RedisQueue,
) -> None:
    now = time.time()
    queue.enqueue(make_candidate(user_id="u1", org_id="acme", trace_id="t", text="tea"), now=now)
    org = make_candidate(
        user_id=None, trace_id="t", text="no cold calls", scope="org", allow_org=True, org_id="acme"
    )
    queue.enqueue(org, now=now)

    marked = drain(queue, scope="user")

    claimed = {c.namespace for c in queue.claim_due(now=now + 1)}  # before any debounce ends
    assert (marked, claimed) == (1, {"org:acme:user:u1"})
