"""What a consolidation reports beyond its commit: metrics, a delivery request, a due lag."""

from __future__ import annotations

import pytest

from worker.consolidation.plan import Plan
from worker.consolidation.rules import RulesConsolidator
from worker.errors import ConsolidatorError
from worker.metrics import REGISTRY
from worker.models import Candidate, NamespaceState, make_candidate
from worker.queue.redis_queue import Claim, RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.sweep import sweep
from worker.settings import Settings
from worker.store.memory import MemoryStore

T0 = 1_800_000_000.0


@pytest.fixture
def store(sqlite_store: MemoryStore) -> MemoryStore:
    """SQLite of this test alone."""
    return sqlite_store


class Broken:
    name = "broken"

    def merge(self, state: NamespaceState, batch: list[Candidate], *, now: object) -> Plan:
        raise ConsolidatorError("model provider timed out")


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def claim_one(queue: RedisQueue, user: str, text: str = "I prefer tea") -> Claim:
    queue.enqueue(make_candidate(user_id=user, trace_id="t1", text=text), now=T0)
    claim = queue.claim_namespace(f"user:{user}", now=T0)
    assert claim is not None
    return claim


def pipeline(
    queue: RedisQueue, store: MemoryStore, settings: Settings, requests: list[str], **kw: object
) -> Pipeline:
    parts: dict[str, object] = {
        "consolidator": RulesConsolidator.from_settings(settings.for_consolidation),
        "sinks": ("files",),
        **kw,
    }
    return Pipeline(
        queue=queue,
        store=store,
        settings=settings.for_consolidation,
        after_commit=lambda: requests.append("deliver"),
        **parts,  # type: ignore[arg-type]
    )


def test_a_commit_with_sinks_asks_for_a_delivery(
    queue: RedisQueue, store: MemoryStore, settings: Settings, key_prefix: str
) -> None:
    requests: list[str] = []
    result = pipeline(queue, store, settings, requests).consolidate(claim_one(queue, key_prefix))
    assert (result.outcome, requests) == ("committed", ["deliver"])


def test_a_commit_without_sinks_asks_for_no_delivery(
    queue: RedisQueue, store: MemoryStore, settings: Settings, key_prefix: str
) -> None:
    requests: list[str] = []
    p = pipeline(queue, store, settings, requests, sinks=())
    assert p.consolidate(claim_one(queue, key_prefix)).outcome == "committed"
    assert requests == []


def test_a_failed_batch_asks_for_no_delivery_and_counts_a_failure(
    queue: RedisQueue, store: MemoryStore, settings: Settings, key_prefix: str
) -> None:
    requests: list[str] = []
    failures = sample("memworker_failures_total", stage="consolidate")
    failed = sample("memworker_consolidations_total", outcome="failed")
    p = pipeline(queue, store, settings, requests, consolidator=Broken())

    assert p.consolidate(claim_one(queue, key_prefix)).outcome == "failed"
    assert requests == []
    assert sample("memworker_failures_total", stage="consolidate") == failures + 1
    assert sample("memworker_consolidations_total", outcome="failed") == failed + 1


def test_a_commit_is_counted_under_its_outcome(
    queue: RedisQueue, store: MemoryStore, settings: Settings, key_prefix: str
) -> None:
    before = sample("memworker_consolidations_total", outcome="committed")
    failures = sample("memworker_failures_total", stage="consolidate")
    pipeline(queue, store, settings, []).consolidate(claim_one(queue, key_prefix))
    assert sample("memworker_consolidations_total", outcome="committed") == before + 1
    assert sample("memworker_failures_total", stage="consolidate") == failures


def test_a_sweep_observes_how_long_each_namespace_waited_past_its_due_time(
    queue: RedisQueue, settings: Settings, key_prefix: str
) -> None:
    queue.enqueue(make_candidate(user_id=key_prefix, trace_id="t1", text="I prefer tea"), now=T0)
    due = T0 + settings.debounce_seconds
    lag_sum = sample("memworker_due_lag_seconds_sum")
    lag_count = sample("memworker_due_lag_seconds_count")
    claims_before = sample("memworker_claims_total")

    claimed = sweep(queue, lambda _claim: None, now=due + 2.5)

    assert [c.namespace for c in claimed] == [f"user:{key_prefix}"]
    assert sample("memworker_due_lag_seconds_count") == lag_count + 1
    assert sample("memworker_due_lag_seconds_sum") == pytest.approx(lag_sum + 2.5)
    assert sample("memworker_claims_total") == claims_before + 1


def test_a_sweep_with_nothing_due_observes_no_lag(
    queue: RedisQueue, settings: Settings, key_prefix: str
) -> None:
    queue.enqueue(make_candidate(user_id=key_prefix, trace_id="t1", text="I prefer tea"), now=T0)
    lag_count = sample("memworker_due_lag_seconds_count")

    assert sweep(queue, lambda _claim: None, now=T0 + 1) == []
    assert sample("memworker_due_lag_seconds_count") == lag_count


def test_sweeps_refresh_the_queue_gauges_once_per_period_not_on_every_sweep(
    queue: RedisQueue, key_prefix: str
) -> None:
    from worker.service.sweep import GaugeSchedule

    schedule = GaugeSchedule(every_seconds=3600)
    reads = 0
    stats = queue.admin.stats

    def counting_stats(**kwargs):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return stats(**kwargs)

    queue.admin.stats = counting_stats  # type: ignore[method-assign]
    for step in range(5):
        sweep(queue, lambda _claim: None, now=T0 + step, gauges=schedule)

    assert reads == 1
