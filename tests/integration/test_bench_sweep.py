"""The sweep benchmark runs end to end on a small queue (its figures are for the README, not
asserted here): it drives the real enqueue, claim, ack and stats scripts, so a change to their
arguments that the bench missed shows up in CI, not on the next benchmark run."""

from __future__ import annotations

import pytest

from bench.bench_sweep import measure

pytestmark = pytest.mark.slow


def test_the_sweep_benchmark_runs_on_a_small_queue_and_counts_what_it_made() -> None:
    lines = measure(1_100, 4)
    report = "\n".join(lines)

    assert "sweep (claim + stats every sweep)" in report
    assert "status (queue stats)" in report
    assert "0 of their keys left" in report  # acked namespaces leave no keys behind
    assert "stats at the end: 1,100 waiting" in report
