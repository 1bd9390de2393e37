"""``memworker status`` names a sink whose breaker opened, with its last error."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.integration.test_cli_support import Ops, ops
from worker.store.outbox import BREAKER_THRESHOLD

__all__ = ["ops"]


def test_status_reports_a_failing_sink_and_until_when_it_is_left_alone(ops: Ops) -> None:
    sink = "sink-" + ops.user
    for _ in range(BREAKER_THRESHOLD):
        ops.store.record_sink_failure(sink, "connect timeout", now=datetime.now(UTC))

    report = ops("status", "--json").json()
    text = ops("status").out

    assert report["failing_sinks"][sink]["state"] == "open"
    assert report["failing_sinks"][sink]["last_error"] == "connect timeout"
    assert f"sink {sink} failing" in " ".join(text.split())


def test_status_lists_no_failing_sink_once_it_delivered_again(ops: Ops) -> None:
    sink = "sink-" + ops.user
    ops.store.record_sink_failure(sink, "connect timeout", now=datetime.now(UTC))
    ops.store.record_sink_success(sink, now=datetime.now(UTC))

    assert sink not in ops("status", "--json").json()["failing_sinks"]
