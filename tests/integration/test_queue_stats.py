"""Queue statistics come from counters the scripts keep, and a namespace that empties is
forgotten: its meta hash and log go, while its stream ids keep increasing.

The counters are checked against a full recount (every member of every set, every log) after
each step of random sequences of every queue operation.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest
import redis

from worker.consolidation.rules import RulesConsolidator
from worker.errors import BacklogFull, BusyNamespace, NotFound
from worker.models import Candidate, make_candidate
from worker.queue.redis_queue import Claim, RedisQueue
from worker.queue.scripts import collect_stats, rebuild_stats, recount_stats
from worker.service.consolidate import Pipeline
from worker.service.sweep import prepare_queue
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.types import Outcome

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0: Final = 1_700_000_000.0  # debounce 30 s, max wait 300 s, lease 60 s, 3 attempts
DAY: Final = 86_400.0
NAMESPACES: Final = ("user:u1", "user:u2", "user:u3", "agent:bot", "org:acme", "org:acme:user:u1")
#: Operations per random sequence, and how many sequences (one seed each).
STEPS: Final = 60
SEEDS: Final = range(12)


def candidate(namespace: str, text: str = "I prefer tea") -> Candidate:
    if namespace.startswith("org:") and ":user:" in namespace:  # a user of an org
        org, user = namespace.split(":")[1], namespace.split(":")[3]
        return make_candidate(user_id=user, org_id=org, trace_id="t", text=text)
    scope, _, name = namespace.partition(":")
    if scope == "agent":
        return make_candidate(
            user_id="u0", trace_id="t", text=text, scope="agent", assistant_id=name
        )
    if scope == "org":
        return make_candidate(
            user_id="u0", trace_id="t", text=text, scope="org", allow_org=True, org_id=name
        )
    return make_candidate(user_id=name, trace_id="t", text=text)


def _keys(client: redis.Redis, queue: RedisQueue, namespace: str) -> int:
    return int(client.exists(queue.layout.meta(namespace), queue.layout.log(namespace)))


class Operator:
    """Random queue operations at a clock that moves on (sometimes past a lease's end)."""

    def __init__(self, queue: RedisQueue, rng: random.Random) -> None:
        self.queue, self.rng = queue, rng
        self.now = T0
        self.claims: list[Claim] = []

    def step(self) -> str:
        ops: dict[str, Callable[[], object]] = {
            "enqueue": self.enqueue,
            "claim_due": lambda: self.claims.extend(self.queue.claim_due(now=self.now)),
            "claim_namespace": self.claim_namespace,
            "ack": lambda: self.settle("ack"),
            "fail": lambda: self.settle("fail"),
            "outage": lambda: self.settle("outage"),
            "release": lambda: self.settle("release"),
            "extend": lambda: self.settle("extend"),
            "mark_due": lambda: self.queue.mark_due(self.pick(), now=self.now),
            "retry_dead": lambda: self.queue.admin.retry_dead(self.pick(), now=self.now),
            "drop_dead": self.drop_dead,
            "purge": self.purge,
            "wait": self.wait,
        }
        weights = {"enqueue": 6, "claim_due": 3, "ack": 3, "wait": 3}
        name = self.rng.choices(list(ops), [weights.get(n, 1) for n in ops])[0]
        ops[name]()
        return name

    def pick(self) -> str:
        return self.rng.choice(NAMESPACES)

    def enqueue(self) -> None:
        self.queue.enqueue_many(
            [candidate(self.pick()) for _ in range(self.rng.randint(1, 3))], now=self.now
        )

    def claim_namespace(self) -> None:
        claim = self.queue.claim_namespace(self.pick(), now=self.now)
        if claim is not None:
            self.claims.append(claim)

    def settle(self, how: str) -> None:
        if not self.claims:
            return
        claim = self.claims.pop(self.rng.randrange(len(self.claims)))  # maybe a stale one
        if how == "ack":
            self.queue.ack(claim, now=self.now)
        elif how == "fail":
            self.queue.fail(claim, "boom", now=self.now)
        elif how == "outage":
            self.queue.outage(claim, "database down", now=self.now)
        elif how == "release":
            self.queue.release(claim, now=self.now)
        else:
            self.queue.extend(claim, now=self.now)
            self.claims.append(claim)

    def drop_dead(self) -> None:
        with contextlib.suppress(NotFound):
            self.queue.admin.drop_dead(self.pick())

    def purge(self) -> None:
        with contextlib.suppress(BusyNamespace):
            self.queue.admin.purge_namespace(self.pick(), now=self.now)

    def wait(self) -> None:
        # Past a debounce, a max wait, a retry backoff or a lease's end (60 s), now and then.
        self.now += self.rng.choice([1, 10, 31, 61, 301])


@pytest.mark.parametrize("seed", SEEDS)
def test_counted_stats_equal_a_full_recount_after_every_operation(
    queue: RedisQueue, seed: int
) -> None:
    op = Operator(queue, random.Random(seed))
    for step in range(STEPS):
        name = op.step()
        at_ms = int(op.now * 1000)

        counted = collect_stats(queue.redis, queue.layout, at_ms)
        recounted = recount_stats(queue.redis, queue.layout, at_ms)

        assert counted == recounted, f"step {step} ({name}) of seed {seed}"


def test_due_namespaces_beyond_those_looked_at_are_still_counted(queue: RedisQueue) -> None:
    queue.enqueue_many([candidate(f"user:u{i}") for i in range(10)], now=T0)

    user = collect_stats(queue.redis, queue.layout, int((T0 + 31) * 1000), looked_at=1)
    user_scope = user.scopes["user"]

    assert (user_scope.due, user_scope.waiting) == (10, 0)


def test_a_user_of_an_org_is_counted_in_the_user_scope_not_the_orgs(queue: RedisQueue) -> None:
    queue.enqueue(candidate("org:acme:user:u1"), now=T0)

    scopes = queue.admin.stats(now=T0).scopes

    assert (scopes["user"].pending, scopes["user"].waiting) == (1, 1)
    assert "org" not in scopes or scopes["org"].pending == 0


def test_a_parked_namespace_counts_as_leased_not_due(queue: RedisQueue) -> None:
    queue.enqueue(candidate("user:u1"), now=T0)
    assert queue.claim_namespace("user:u1", now=T0) is not None
    assert queue.mark_due("user:u1", now=T0)  # parked until the lease ends

    user = queue.admin.stats(now=T0 + 61).scopes["user"]  # the lease has run out, unclaimed

    assert (user.leased, user.due, user.waiting) == (1, 0, 0)


def test_the_last_ack_deletes_the_namespaces_meta_and_log(
    redis_client: redis.Redis, queue: RedisQueue
) -> None:
    queue.enqueue(candidate("user:u1"), now=T0)
    (claim,) = queue.claim_due(now=T0 + 30)

    queue.ack(claim, now=T0 + 31)

    assert _keys(redis_client, queue, "user:u1") == 0


def test_an_ack_with_arrivals_left_keeps_the_namespace(
    redis_client: redis.Redis, queue: RedisQueue
) -> None:
    queue.enqueue(candidate("user:u1"), now=T0)
    (claim,) = queue.claim_due(now=T0 + 30)
    queue.enqueue(candidate("user:u1", "I moved to Oslo"), now=T0 + 31)

    queue.ack(claim, now=T0 + 32)

    assert _keys(redis_client, queue, "user:u1") == 2


def test_dropping_a_dead_letter_deletes_its_meta_and_log(
    redis_client: redis.Redis, queue: RedisQueue
) -> None:
    queue.enqueue(candidate("user:u1"), now=T0)
    for attempt in range(3):
        claim = queue.claim_namespace("user:u1", now=T0 + attempt)
        assert claim is not None
        queue.fail(claim, "boom", now=T0 + attempt)

    queue.admin.drop_dead("user:u1")

    assert _keys(redis_client, queue, "user:u1") == 0


def test_ids_keep_increasing_after_the_meta_went_and_the_clock_stepped_back(
    queue: RedisQueue,
) -> None:
    first = queue.enqueue(candidate("user:u1"), now=T0 + DAY)  # a clock a day ahead
    (claim,) = queue.claim_due(now=T0 + DAY + 30)
    queue.ack(claim, now=T0 + DAY + 31)  # meta deleted

    later = queue.enqueue(candidate("user:u1", "I moved to Oslo"), now=T0)  # clock back

    assert tuple(map(int, later.split("-"))) > tuple(map(int, first.split("-")))


def test_ids_keep_increasing_after_a_purge_and_the_clock_stepped_back(queue: RedisQueue) -> None:
    first = queue.enqueue(candidate("user:u1"), now=T0 + DAY)
    queue.admin.purge_namespace("user:u1", now=T0 + DAY)

    later = queue.enqueue(candidate("user:u1", "I moved to Oslo"), now=T0)

    assert tuple(map(int, later.split("-"))) > tuple(map(int, first.split("-")))


def test_a_batch_enqueued_after_the_meta_went_and_the_clock_stepped_back_is_merged(
    queue: RedisQueue, settings: Settings, tmp_path: Path
) -> None:
    store = MemoryStore.from_url(f"sqlite:///{tmp_path / 'ids.sqlite3'}", create=True)
    pipeline = Pipeline(queue, store, RulesConsolidator(), settings.for_consolidation)
    try:
        queue.enqueue(candidate("user:u1", "I prefer tea"), now=T0 + DAY)
        ahead = queue.claim_namespace("user:u1", now=T0 + DAY)
        assert ahead is not None
        assert pipeline.consolidate(ahead).outcome is Outcome.COMMITTED  # acked: meta gone
        queue.enqueue(candidate("user:u1", "I moved to Oslo last spring"), now=T0)

        behind = queue.claim_namespace("user:u1", now=T0)
        assert behind is not None
        result = pipeline.consolidate(behind)

        assert (result.outcome, result.candidates) == (Outcome.COMMITTED, 1)
    finally:
        store.dispose()


def test_an_ack_that_leaves_arrivals_makes_room_under_the_backlog_limit(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(
        redis_client, settings.model_copy(update={"max_pending_per_namespace": 3}).for_queue
    )
    queue.admin.publish_policy()
    queue.enqueue_many([candidate("user:u1", "a"), candidate("user:u1", "b")], now=T0)
    (claim,) = queue.claim_due(now=T0 + 30)
    queue.enqueue(candidate("user:u1", "c"), now=T0 + 31)  # 3 pending: the limit
    queue.ack(claim, now=T0 + 32)  # 1 left

    queue.enqueue_many([candidate("user:u1", "d"), candidate("user:u1", "e")], now=T0 + 33)

    with pytest.raises(BacklogFull):
        queue.enqueue(candidate("user:u1", "f"), now=T0 + 34)


def _forget_counters(client: redis.Redis, queue: RedisQueue) -> None:
    """What a shard written by a release that kept no set counters looks like."""
    for shard in range(queue.layout.shards):
        stats = queue.layout.stats(shard)
        fields = [f for f in client.hkeys(stats) if b":" in f or f == b"v"]
        if fields:
            client.hdel(stats, *fields)
        for scope in ("user", "agent", "org"):
            client.delete(queue.layout.oldest(shard, scope))


def test_shards_written_without_counters_are_recounted_once_at_worker_start(
    redis_client: redis.Redis, queue: RedisQueue
) -> None:
    for ns in NAMESPACES:
        queue.enqueue(candidate(ns), now=T0)
    assert queue.claim_namespace("user:u1", now=T0) is not None
    assert queue.mark_due("user:u1", now=T0)  # leased and parked
    for attempt in range(3):
        claim = queue.claim_namespace("org:acme", now=T0 + attempt)
        assert claim is not None
        queue.fail(claim, "boom", now=T0 + attempt)
    _forget_counters(redis_client, queue)

    prepare_queue(queue.admin)
    at_ms = int((T0 + 31) * 1000)

    assert collect_stats(queue.redis, queue.layout, at_ms) == recount_stats(
        queue.redis, queue.layout, at_ms
    )
    assert rebuild_stats(queue.redis, queue.layout) == 0  # counted already: nothing to do
