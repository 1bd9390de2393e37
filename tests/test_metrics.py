"""Prometheus metrics: declared once on memworker's own registry, exposed in text format."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

import prometheus_client
from prometheus_client import generate_latest

from worker.metrics import (
    CLAIMS,
    LLM_TOKENS,
    REGISTRY,
    SINK_DELIVERIES,
    refresh_queue_gauges,
    start_metrics_server,
)

#: Bound on the scrape request to the local metrics server; it answers at once.
SCRAPE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Counts:
    pending: int
    due: int
    leased: int
    dead: int


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


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
