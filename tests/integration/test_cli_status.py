"""``memworker status``: the queue plus schedules, sink lag and failed runs from SQL."""

from __future__ import annotations

import gc
from datetime import UTC, datetime

import pytest

from tests.integration.test_cli_support import Ops, ops
from worker.store.memory import RunRecord

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

__all__ = ["ops"]


def test_status_json_has_queue_schedules_sink_lag_and_failed_runs(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops.store.record_run(
        RunRecord(
            trigger="queue",
            namespace=f"user:{ops.user}",
            started_at=datetime.now(UTC),
            outcome="failed",
            error="boom",
        )
    )

    ran = ops("status", "--json")

    report = ran.json()
    assert ran.code == 0
    assert report["user"]["pending"] == 1
    assert {s["name"] for s in report["schedules"]} >= {"nightly-scan", "weekly-compact"}
    assert report["failed_runs_24h"] >= 1
    assert isinstance(report["sinks"], dict)


def test_status_reports_a_schedules_last_tick_and_window(ops: Ops) -> None:
    tick = datetime(2026, 1, 5, 3, tzinfo=UTC)
    window = (datetime(2026, 1, 4, 3, tzinfo=UTC), tick)
    ops.store.try_start_tick("nightly-scan", tick, now=tick)
    ops.store.finish_tick("nightly-scan", tick, ok=True, window=window, error=None, now=tick)

    ran = ops("status", "--json")

    (nightly,) = [s for s in ran.json()["schedules"] if s["name"] == "nightly-scan"]
    assert nightly["last_tick"]["status"] == "ok"
    assert nightly["last_tick"]["window"] == [t.isoformat() for t in window]


def test_status_counts_undelivered_versions_per_sink(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    before = ops("status", "--json").json()["sinks"].get("files", {"pending": 0})["pending"]
    runtime = ops.runtime()
    try:
        claim = runtime.queue.claim_namespace(f"user:{ops.user}")
        assert claim is not None
        runtime.pipeline.consolidate(claim)  # committed; nobody delivered it yet
    finally:
        runtime.close()

    ran = ops("status", "--json")

    assert ran.json()["sinks"]["files"]["pending"] == before + 1


def test_status_with_redis_down_says_redis_is_unreachable_not_that_nothing_was_enqueued(
    ops: Ops,
) -> None:
    ran = ops("status", MEMWORKER_REDIS_URL="redis://127.0.0.1:1/0")

    message = " ".join(ran.err.split())
    assert ran.code == 4
    assert "Redis at redis://127.0.0.1:1/0 is unreachable" in message
    assert "the queue could not be read" in message
    assert "enqueued" not in message


def test_status_names_the_cluster_it_reads_and_nothing_on_one_node(ops: Ops) -> None:
    ran = ops("status")
    report = ops("status", "--json").json()

    clustered = str(ops.settings.redis_url).startswith("redis+cluster://")
    assert ran.code == 0
    assert report["redis"]["cluster_primaries"] == (3 if clustered else None)
    assert ("redis: a cluster of 3 primaries, appendonly" in ran.out) == clustered


def test_status_leaves_the_garbage_collector_running(ops: Ops) -> None:
    ran = ops("status", "--json")

    assert ran.code == 0
    assert gc.isenabled()
