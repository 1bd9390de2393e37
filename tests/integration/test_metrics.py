"""Prometheus metrics: declared once on memworker's own registry, exposed in text format."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

import prometheus_client
import pytest
import redis
from prometheus_client import generate_latest

from tests.support.memory_queue import LOADED_MACHINE_SECONDS, deploy_policy
from worker import AsyncMemoryClient, BacklogFull, MemoryClient
from worker.metrics import (
    CLAIMS,
    LLM_TOKENS,
    REGISTRY,
    SINK_DELIVERIES,
    observe_due_lag,
    refresh_queue_gauges,
    start_metrics_server,
)
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.queue.scripts import to_ms
from worker.settings import Settings

#: Bound on the scrape request to the local metrics server; it answers at once.
SCRAPE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Counts:
    pending: int
    due: int
    leased: int
    dead: int


T0 = 1_700_000_000.0  # debounce 30 s (the settings fixture)
DUE = T0 + 30


@dataclass(frozen=True)
class DueAt:
    due_at_ms: int | None


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def enqueued(scope: str = "user") -> float:
    return sample("memworker_enqueued_total", scope=scope)


def lag_samples() -> tuple[float, float, float, float]:
    """Due-lag histogram: count, sum, and the cumulative buckets le=1.0 and le=2.5."""
    return (
        sample("memworker_due_lag_seconds_count"),
        sample("memworker_due_lag_seconds_sum"),
        sample("memworker_due_lag_seconds_bucket", le="1.0"),
        sample("memworker_due_lag_seconds_bucket", le="2.5"),
    )


def test_a_counter_increment_shows_in_the_text_exposition() -> None:
    before = sample("memworker_sink_deliveries_total", sink="files", outcome="ok")
    SINK_DELIVERIES.labels(sink="files", outcome="ok").inc()
    line = f'memworker_sink_deliveries_total{{outcome="ok",sink="files"}} {before + 1}'
    assert line.encode() in generate_latest(REGISTRY)


def test_labelled_counters_count_each_label_apart() -> None:
    before = sample("memworker_llm_tokens_total", kind="output")
    LLM_TOKENS.labels(kind="input").inc(100)
    assert sample("memworker_llm_tokens_total", kind="output") == before


def test_metrics_stay_off_the_global_registry() -> None:
    CLAIMS.inc()
    assert prometheus_client.REGISTRY.get_sample_value("memworker_claims_total") is None


def test_queue_gauges_take_each_scope_from_the_stats() -> None:
    refresh_queue_gauges({"agent": Counts(pending=9, due=3, leased=2, dead=1)})
    assert [
        sample(f"memworker_{name}", scope="agent")
        for name in ("pending_candidates", "due_namespaces", "leased_namespaces", "dead_letters")
    ] == [9, 3, 2, 1]


def test_queue_gauges_reset_a_scope_missing_from_the_stats_to_zero() -> None:
    refresh_queue_gauges({"org": Counts(pending=4, due=1, leased=1, dead=2)})
    refresh_queue_gauges({})
    assert sample("memworker_pending_candidates", scope="org") == 0
    assert sample("memworker_dead_letters", scope="org") == 0


def test_metrics_server_serves_the_registry_over_http() -> None:
    CLAIMS.inc()
    server, thread = start_metrics_server(0, addr="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_SECONDS) as response:
            body = response.read()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert b"memworker_claims_total" in body


# --- memworker_enqueued_total ----------------------------------------------------------------


def test_a_hot_path_enqueue_counts_once_in_its_scope(settings: Settings) -> None:
    before = enqueued("user")
    with MemoryClient(settings) as client:
        client.enqueue(user_id="u1", trace_id="t", text="I prefer tea")

    assert enqueued("user") == before + 1


def test_an_agent_scope_enqueue_counts_in_the_agent_scope(settings: Settings) -> None:
    before = (enqueued("user"), enqueued("agent"))
    with MemoryClient(settings) as client:
        client.enqueue(
            user_id="u1", trace_id="t", text="Closes at 6", scope="agent", assistant_id="b"
        )

    assert (enqueued("user"), enqueued("agent")) == (before[0], before[1] + 1)


def test_hot_path_enqueue_many_counts_each_candidate(settings: Settings) -> None:
    before = enqueued()
    with MemoryClient(settings) as client:
        client.enqueue_many(
            [{"user_id": f"u{i}", "trace_id": "t", "text": "tea"} for i in range(3)]
        )

    assert enqueued() == before + 3


async def test_an_async_hot_path_enqueue_counts_once(settings: Settings) -> None:
    before = enqueued()
    async with AsyncMemoryClient(settings) as client:
        await client.enqueue(user_id="u1", trace_id="t", text="I prefer tea")
        await client.enqueue_many([{"user_id": "u2", "trace_id": "t", "text": "tea"}])

    assert enqueued() == before + 2


def test_a_candidate_refused_with_backlog_full_is_not_counted(
    redis_url: str, key_prefix: str
) -> None:
    deploy_policy(redis_url, key_prefix, max_pending_per_namespace=1)
    with MemoryClient.from_url(
        redis_url, key_prefix=key_prefix, socket_timeout_seconds=LOADED_MACHINE_SECONDS
    ) as c:
        c.enqueue(user_id="u1", trace_id="t", text="one")
        before = enqueued()
        with pytest.raises(BacklogFull):
            c.enqueue(user_id="u1", trace_id="t", text="two")

    assert enqueued() == before


def test_enqueue_many_counts_the_accepted_candidates_when_one_is_refused(
    redis_url: str, key_prefix: str
) -> None:
    deploy_policy(redis_url, key_prefix, max_pending_per_namespace=1)
    before = enqueued()
    with (
        MemoryClient.from_url(
            redis_url, key_prefix=key_prefix, socket_timeout_seconds=LOADED_MACHINE_SECONDS
        ) as c,
        pytest.raises(BacklogFull),
    ):
        c.enqueue_many(
            [
                {"user_id": "u1", "trace_id": "t", "text": "one"},
                {"user_id": "u1", "trace_id": "t", "text": "two"},  # u1 is full: refused
                {"user_id": "u2", "trace_id": "t", "text": "three"},
            ]
        )

    assert enqueued() == before + 2


def test_a_worker_side_enqueue_counts_once(redis_client: redis.Redis, settings: Settings) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    before = enqueued()

    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="tea"), now=T0)

    assert enqueued() == before + 1


def test_worker_side_enqueue_many_counts_each_candidate(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    before = enqueued()

    queue.enqueue_many(
        [make_candidate(user_id=f"u{i}", trace_id="t", text="tea") for i in range(4)], now=T0
    )

    assert enqueued() == before + 4


def test_a_worker_side_enqueue_refused_with_backlog_full_is_not_counted(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(
        redis_client, settings.model_copy(update={"max_pending_per_namespace": 1}).for_queue
    )
    queue.admin.publish_policy()
    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="one"), now=T0)
    before = enqueued()

    with pytest.raises(BacklogFull):
        queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="two"), now=T0)
    with pytest.raises(BacklogFull):
        queue.enqueue_many([make_candidate(user_id="u1", trace_id="t", text="three")], now=T0)

    assert enqueued() == before


# --- memworker_due_lag_seconds -----------------------------------------------------------------


def test_a_claim_due_at_t_and_claimed_at_t_plus_2_5_s_observes_2_5_s(
    redis_client: redis.Redis, settings: Settings
) -> None:
    queue = RedisQueue(redis_client, settings.for_queue)
    queue.enqueue(make_candidate(user_id="u1", trace_id="t", text="tea"), now=T0)
    count, total, le_1, le_2_5 = lag_samples()

    claims = queue.claim_due(now=DUE + 2.5)
    observe_due_lag(claims, to_ms(DUE + 2.5))

    after = lag_samples()
    assert (after[0], after[2], after[3]) == (count + 1, le_1, le_2_5 + 1)
    assert after[1] - total == pytest.approx(2.5)


def test_a_claim_without_a_due_time_observes_nothing() -> None:
    before = lag_samples()

    observe_due_lag([DueAt(due_at_ms=None)], 5_000)

    assert lag_samples() == before


def test_a_due_time_after_the_claim_time_observes_zero_lag() -> None:
    count, total, le_1, _ = lag_samples()

    observe_due_lag([DueAt(due_at_ms=6_000)], 5_000)  # clocks of two hosts disagree

    after = lag_samples()
    assert (after[0], after[1], after[2]) == (count + 1, total, le_1 + 1)
