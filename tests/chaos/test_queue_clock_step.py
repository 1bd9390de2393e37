"""Leases survive a step of the Redis server's clock (an NTP step), backwards or forwards.

The queue's clock is the Redis server's ``TIME``, a wall clock. A worker claims a namespace
and dies; then the server's clock steps back an hour. Judged by its expiry alone, the 4 s
lease would hold for an hour and the namespace's candidates would wait that long. A lease
records the start of its term, and a clock that reads more than one lease length before that
start has stepped back: the lease no longer holds. A step forward expires leases early; the
takeover then only duplicates work, and the SQL fence keeps every candidate merged once.

Time is the scripts' ``now`` argument: each test steps it as the server's clock would step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Final

import pytest
import redis
import sqlalchemy as sa

from worker.consolidation.plan import Plan
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, NamespaceState, make_candidate
from worker.queue.redis_queue import Claim, RedisQueue
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore

#: Each queue test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

T0: Final = 1_700_000_000.0
LEASE: Final = 4.0  #: the lease of the attack: a 4 s lease, its holder dead
HOUR: Final = 3600.0
NS: Final = "user:u1"


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    cfg = settings.model_copy(update={"lease_seconds": LEASE})
    return RedisQueue(redis_client, cfg.for_queue)


def claimed(queue: RedisQueue, at: float = T0) -> Claim:
    """A claim of user u1's batch made at ``at`` (by a worker that may die holding it)."""
    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="I prefer tea"), now=at)
    claim = queue.claim_namespace(NS, now=at)
    assert claim is not None
    return claim


def test_a_dead_workers_lease_is_reclaimed_at_the_first_sweep_after_the_clock_steps_back_an_hour(
    queue: RedisQueue,
) -> None:
    dead = claimed(queue)

    (taken,) = queue.claim_due(now=T0 - HOUR + 1)

    assert (taken.namespace, taken.covered, taken.count) == (NS, dead.covered, dead.count)
    assert taken.token > dead.token
    assert taken.attempts == 1


def test_a_lease_given_up_after_a_step_back_says_why(queue: RedisQueue) -> None:
    claimed(queue)
    queue.claim_due(now=T0 - HOUR + 1)

    assert "clock stepped back" in (queue.admin.namespace_state(NS).last_error or "")


def test_a_lease_given_up_after_a_step_back_is_due_from_the_takeover_not_from_its_expiry(
    queue: RedisQueue,
) -> None:
    claimed(queue)

    (taken,) = queue.claim_due(now=T0 - HOUR + 1)

    assert taken.due_at_ms == int((T0 - HOUR + 1) * 1000)


def test_a_live_worker_whose_heartbeat_comes_first_keeps_its_lease_after_a_step_back(
    queue: RedisQueue,
) -> None:
    live = claimed(queue)

    assert queue.extend(live, now=T0 - HOUR + 1)
    assert queue.claim_due(now=T0 - HOUR + 2) == []
    assert queue.claim_namespace(NS, now=T0 - HOUR + 1 + LEASE - 0.1) is None


def test_a_lease_restarted_after_a_step_back_expires_a_lease_length_later(
    queue: RedisQueue,
) -> None:
    live = claimed(queue)
    queue.extend(live, now=T0 - HOUR + 1)

    (taken,) = queue.claim_due(now=T0 - HOUR + 1 + LEASE)

    assert taken.token > live.token


def test_a_step_back_smaller_than_a_lease_length_leaves_the_lease_held(queue: RedisQueue) -> None:
    claimed(queue)

    assert queue.claim_due(now=T0 - LEASE + 0.5) == []
    assert queue.claim_namespace(NS, now=T0 - LEASE + 0.5) is None


def test_a_longer_lease_of_another_worker_is_not_taken_for_a_step_back(
    redis_client: redis.Redis, settings: Settings, queue: RedisQueue
) -> None:
    """A worker configured with a 60 s lease, swept by one configured with 4 s."""
    long_lease = RedisQueue(redis_client, settings.model_copy(
        update={"lease_seconds": 60.0}).for_queue)  # fmt: skip
    claimed(long_lease)

    assert queue.claim_due(now=T0 + 1) == []
    assert queue.claim_due(now=T0 + 59) == []


def test_the_status_does_not_show_a_lease_that_a_step_back_ended(queue: RedisQueue) -> None:
    claimed(queue)

    assert queue.admin.namespace_state(NS, now=T0 + 1).leased
    assert not queue.admin.namespace_state(NS, now=T0 - HOUR + 1).leased


def test_forget_is_not_refused_by_a_dead_workers_lease_after_a_step_back(
    queue: RedisQueue,
) -> None:
    claimed(queue)

    assert queue.admin.purge_namespace(NS, now=T0 - HOUR + 1) == 1
    assert queue.admin.pending(NS) == []


def test_reconcile_makes_the_namespace_due_at_once_after_a_step_back(queue: RedisQueue) -> None:
    claimed(queue)

    assert queue.mark_due(NS, now=T0 - HOUR + 1)
    assert [c.namespace for c in queue.claim_due(now=T0 - HOUR + 1)] == [NS]


def test_a_step_forward_expires_the_lease_and_the_old_holder_can_neither_extend_nor_ack(
    queue: RedisQueue,
) -> None:
    live = claimed(queue)

    (taken,) = queue.claim_due(now=T0 + HOUR)

    assert taken.token > live.token
    assert not queue.extend(live, now=T0 + HOUR + 1)
    assert queue.ack(live, now=T0 + HOUR + 1) is False
    assert [c.text for _, c in queue.admin.pending(NS)] == ["I prefer tea"]


# --- a step forward, end to end: the SQL fence keeps a batch merged once ----------------------
class BarrierConsolidator(RulesConsolidator):
    """Both workers have read the same state before either commits."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        self.barrier.wait(timeout=30)
        return super().merge(state, batch, now=now)


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


def ledger(store: MemoryStore, namespace: str) -> list[str]:
    query = sa.text(
        "SELECT l.candidate_id FROM candidate_ledger l JOIN namespaces n"
        " ON n.id = l.namespace_id WHERE n.key = :ns ORDER BY l.candidate_id"
    )
    with store.engine.connect() as conn:
        return [row[0] for row in conn.execute(query, {"ns": namespace})]


def test_a_live_worker_overtaken_by_a_step_forward_commits_the_batch_once_with_its_successor(
    redis_client: redis.Redis, settings: Settings, store: MemoryStore, key_prefix: str
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    user = "u-" + key_prefix  # the PostgreSQL database is shared by the session
    namespace = f"user:{user}"
    texts = ("I prefer tea", "I live in Oslo")
    batch = [make_candidate(user_id=user, trace_id="t", text=t) for t in texts]
    for candidate in batch:
        queue.enqueue(candidate)
    live = queue.claim_namespace(namespace)  # on the server's clock
    assert live is not None
    # The server's clock steps an hour forward: the next sweep takes the live worker's lease.
    successor = queue.claim_namespace(namespace, now=time.time() + HOUR)
    assert successor is not None
    assert successor.token > live.token
    pipeline = Pipeline(
        queue=queue, store=store, consolidator=BarrierConsolidator(threading.Barrier(2)),
        settings=settings.for_consolidation,
    )  # fmt: skip
    outcomes: list[str] = []
    workers = [threading.Thread(target=lambda c=c: outcomes.append(
        pipeline.consolidate(c).outcome)) for c in (live, successor)]  # fmt: skip
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    assert sorted(outcomes) == ["committed", "stale"]
    assert ledger(store, namespace) == sorted(c.id for c in batch)
    versions = [len(store.file_history(namespace, f.path)) for f in store.list_files(namespace)]
    assert versions != []
    assert set(versions) == {1}  # one commit wrote each file
