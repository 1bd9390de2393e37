"""The consolidation pipeline: claim → read → merge → one commit → ack, on real Redis and SQL.

Each test states one guarantee of DESIGN §3.3: nothing lost, nothing duplicated, no
half-written version, the database as the fence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime

import pytest
import redis
import sqlalchemy as sa

from worker.consolidation.plan import Plan
from worker.consolidation.rules import RulesConsolidator
from worker.errors import ConsolidatorError
from worker.models import Candidate, NamespaceState, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline, preview
from worker.settings import Settings
from worker.store.memory import MemoryStore


@pytest.fixture
def user(key_prefix: str) -> str:
    """A user of this test alone: the PostgreSQL database is shared by the whole session."""
    return "u-" + key_prefix


@pytest.fixture
def ns(user: str) -> str:
    return f"user:{user}"


@pytest.fixture
def store(database_url: str) -> Iterator[MemoryStore]:
    s = MemoryStore.from_url(database_url, create=True)
    yield s
    s.dispose()


@pytest.fixture
def queue(redis_client: redis.Redis, settings: Settings) -> RedisQueue:
    return RedisQueue(redis_client, settings.for_queue)


def pipeline_with(
    queue: RedisQueue, store: MemoryStore, settings: Settings, consolidator: object = None
) -> Pipeline:
    return Pipeline(
        queue=queue,
        store=store,
        consolidator=consolidator or RulesConsolidator.from_settings(settings.for_consolidation),  # type: ignore[arg-type]
        settings=settings.for_consolidation,
        sinks=("files",),
    )


def enqueue(queue: RedisQueue, user: str, *texts: str, key: str | None = None) -> list[str]:
    ids = []
    for text in texts:
        candidate = make_candidate(user_id=user, trace_id="t1", text=text, key=key)
        queue.enqueue(candidate)
        ids.append(candidate.id)
    return ids


def ledger_ids(store: MemoryStore, ns: str) -> list[str]:
    query = sa.text(
        "SELECT l.candidate_id FROM candidate_ledger l JOIN namespaces n"
        " ON n.id = l.namespace_id WHERE n.key = :ns"
    )
    with store.engine.connect() as conn:
        rows = conn.execute(query, {"ns": ns}).all()
    return sorted(r[0] for r in rows)


def version_count(store: MemoryStore, ns: str) -> int:
    return sum(len(store.file_history(ns, f.path)) for f in store.list_files(ns))


class ExplodingConsolidator(RulesConsolidator):
    """A consolidator whose model call fails, as a provider outage would."""

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        raise ConsolidatorError("model provider timed out")


class DestructiveConsolidator(RulesConsolidator):
    """Schema-valid but unacceptable: invalidates an entry that does not exist here."""

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        return Plan.model_validate(
            {
                "ops": [
                    {
                        "op": "invalidate",
                        "entry_id": "entry-of-another-namespace",
                        "reason": "cleanup",
                        "candidate_ids": [c.id for c in batch],
                    }
                ]
            }
        )


def test_a_claimed_batch_is_committed_once_and_acknowledged(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    ids = enqueue(queue, user, "I prefer short answers", "I live in Lisbon")
    claim = queue.claim_namespace(ns)
    assert claim is not None
    result = pipeline_with(queue, store, settings).consolidate(claim)
    assert result.outcome == "committed"
    assert ledger_ids(store, ns) == sorted(ids)
    assert queue.admin.pending(ns) == []
    assert "Lisbon" in store.current_files(ns)["/memories/facts.md"]


def test_a_consolidator_failure_leaves_every_candidate_pending_and_counts_the_attempt(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    ids = enqueue(queue, user, "I prefer tea")
    claim = queue.claim_namespace(ns)
    assert claim is not None
    result = pipeline_with(queue, store, settings, ExplodingConsolidator()).consolidate(claim)
    assert result.outcome == "failed"
    assert "timed out" in (result.error or "")
    assert [c.id for _, c in queue.admin.pending(ns)] == ids
    assert ledger_ids(store, ns) == []
    assert version_count(store, ns) == 0
    assert queue.claim_namespace(ns) is not None  # released for the retry


def test_an_invalid_plan_is_rejected_and_dead_lettered_after_max_attempts(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    ids = enqueue(queue, user, "I prefer tea")
    pipeline = pipeline_with(queue, store, settings, DestructiveConsolidator())
    outcomes = []
    for attempt in range(settings.max_attempts):
        claim = queue.claim_namespace(ns, now=time.time() + attempt * 10_000)
        assert claim is not None
        outcomes.append(pipeline.consolidate(claim).outcome)
    assert outcomes == ["failed"] * (settings.max_attempts - 1) + ["dead"]
    assert [d.namespace for d in queue.admin.dead_letters()] == [ns]
    assert [c.id for _, c in queue.admin.pending(ns)] == ids
    assert version_count(store, ns) == 0


def test_a_database_error_inside_the_transaction_writes_nothing(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    ids = enqueue(queue, user, "I prefer tea", "I live in Oslo")

    def fail_on_ledger(conn, clauseelement, multiparams, params, execution_options):  # type: ignore[no-untyped-def]
        if "candidate_ledger" in str(clauseelement) and "INSERT" in str(clauseelement).upper():
            raise RuntimeError("connection lost mid-commit")

    sa.event.listen(store.engine, "before_execute", fail_on_ledger)
    claim = queue.claim_namespace(ns)
    assert claim is not None
    try:
        result = pipeline_with(queue, store, settings).consolidate(claim)
    finally:
        sa.event.remove(store.engine, "before_execute", fail_on_ledger)
    assert result.outcome == "failed"
    assert version_count(store, ns) == 0
    assert store.current_files(ns) == {}
    assert [c.id for _, c in queue.admin.pending(ns)] == ids
    retry = queue.claim_namespace(ns, now=time.time() + 10_000)
    assert retry is not None
    assert pipeline_with(queue, store, settings).consolidate(retry).outcome == "committed"
    assert ledger_ids(store, ns) == sorted(ids)


class AckFailingQueue(RedisQueue):
    """Redis goes away between the commit and the acknowledgement."""

    def ack(self, claim, *, now=None):  # type: ignore[no-untyped-def]
        raise redis.ConnectionError("Redis went away before the ack")


def test_a_batch_committed_but_not_acknowledged_is_not_merged_twice(
    user: str,
    ns: str,
    redis_client: redis.Redis,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    ids = enqueue(queue, user, "I prefer tea", "I live in Oslo")
    claim = queue.claim_namespace(ns)
    assert claim is not None
    flaky = AckFailingQueue(redis_client, settings.for_queue)
    assert pipeline_with(flaky, store, settings).consolidate(claim).outcome == "failed"
    versions = version_count(store, ns)
    redelivered = queue.claim_namespace(ns, now=time.time() + 10_000)
    assert redelivered is not None
    result = pipeline_with(queue, store, settings).consolidate(redelivered)
    assert result.outcome == "nothing_new"
    assert result.skipped == len(ids)
    assert version_count(store, ns) == versions
    assert ledger_ids(store, ns) == sorted(ids)
    assert queue.admin.pending(ns) == []


def test_a_zombie_worker_whose_lease_was_taken_over_cannot_duplicate_the_batch(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    ids = enqueue(queue, user, "I prefer tea", "I work at Acme")
    zombie = queue.claim_namespace(ns)
    assert zombie is not None
    successor = queue.claim_namespace(ns, now=time.time() + settings.lease_seconds + 1)
    assert successor is not None
    assert successor.token > zombie.token
    pipeline = pipeline_with(queue, store, settings)
    assert pipeline.consolidate(zombie).outcome == "committed"
    assert queue.admin.pending(ns) != []  # the zombie's ack was refused: its token is stale
    assert pipeline.consolidate(successor).outcome == "nothing_new"
    assert ledger_ids(store, ns) == sorted(ids)
    assert queue.admin.pending(ns) == []


class BarrierConsolidator(RulesConsolidator):
    """Both racing pipelines have read the same state before either commits."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        self.barrier.wait(timeout=30)
        return super().merge(state, batch, now=now)


def test_two_pipelines_racing_on_one_namespace_never_lose_an_update(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    first = enqueue(queue, user, "I prefer tea")
    zombie = queue.claim_namespace(ns)
    second = enqueue(queue, user, "I live in Oslo")
    successor = queue.claim_namespace(ns, now=time.time() + settings.lease_seconds + 1)
    assert zombie is not None
    assert successor is not None
    barrier = threading.Barrier(2)
    pipeline = pipeline_with(queue, store, settings, BarrierConsolidator(barrier))
    results = []
    threads = [
        threading.Thread(target=lambda c=c: results.append(pipeline.consolidate(c)))
        for c in (zombie, successor)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(r.outcome for r in results) == ["committed", "stale"]
    leftover = queue.claim_namespace(ns, now=time.time() + 2 * settings.lease_seconds + 2)
    if leftover is not None:  # the loser's batch was released; it merges what is new
        pipeline_with(queue, store, settings).consolidate(leftover)
    assert ledger_ids(store, ns) == sorted(first + second)
    files = store.current_files(ns)
    assert "tea" in "".join(files.values())
    assert "Oslo" in "".join(files.values())


def test_a_preview_changes_nothing_and_leaves_the_batch_unclaimed(
    user: str,
    ns: str,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    ids = enqueue(queue, user, "I prefer tea")
    consolidator = RulesConsolidator.from_settings(settings.for_consolidation)
    result = preview(
        queue.admin,
        store,
        consolidator,
        settings,
        ns,
        max_batch=settings.max_batch,
        now=datetime.now(UTC),
    )
    assert result.outcome == "dry_run"
    assert [f.path for f in result.files] == ["/memories/preferences.md"]
    assert version_count(store, ns) == 0
    assert ledger_ids(store, ns) == []
    assert [c.id for _, c in queue.admin.pending(ns)] == ids
    assert queue.claim_namespace(ns) is not None  # no lease was taken


def test_a_keyed_fact_supersedes_the_earlier_one_and_history_keeps_both_versions(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    pipeline = pipeline_with(queue, store, settings)
    for text in ("Reply in French", "Reply in German"):
        enqueue(queue, user, text, key="preference.language")
        claim = queue.claim_namespace(ns)
        assert claim is not None
        assert pipeline.consolidate(claim).outcome == "committed"
    content = store.current_files(ns)["/memories/preferences.md"]
    assert "German" in content
    assert "French" not in content
    history = store.file_history(ns, "/memories/preferences.md")
    assert [v.version for v in history] == [1, 2]
    assert "French" in history[0].content


def test_two_users_never_share_a_batch_or_a_file(
    user: str, ns: str, queue: RedisQueue, store: MemoryStore, settings: Settings
) -> None:
    enqueue(queue, user, "I live in Oslo")
    enqueue(queue, user + "-other", "I live in Lima")
    pipeline = pipeline_with(queue, store, settings)
    other = f"{ns}-other"
    for namespace in (ns, other):
        claim = queue.claim_namespace(namespace)
        assert claim is not None
        assert claim.count == 1
        pipeline.consolidate(claim)
    assert "Lima" not in "".join(store.current_files(ns).values())
    assert "Oslo" not in "".join(store.current_files(other).values())
