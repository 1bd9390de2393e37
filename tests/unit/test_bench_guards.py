"""``python -m bench guards`` runs and prints a row per guard class (smoke test; no timing)."""

from __future__ import annotations

from pathlib import Path

from bench.bench_guards import run
from tests.support.guard_heldout_corpus import HELD_OUT_HOSTILE, HELD_OUT_LEGITIMATE
from tests.support.guard_meaning_corpus import HOSTILE, LEGITIMATE


def test_the_bench_prints_both_rates_of_every_class_and_says_when_locomo_is_absent(
    tmp_path: Path,
) -> None:
    lines = run(tmp_path)

    for name in HOSTILE:
        assert any(line.startswith(f"hostile caught: {name}") for line in lines)
    for name in LEGITIMATE:
        assert any(line.startswith(f"legitimate refused: {name}") for line in lines)
    for name in HELD_OUT_HOSTILE:
        assert any(line.startswith(f"held out, hostile caught: {name}") for line in lines)
    for name in HELD_OUT_LEGITIMATE:
        assert any(line.startswith(f"held out, legitimate refused: {name}") for line in lines)
    assert lines[-1].startswith(f"LoCoMo not found at {tmp_path}")
