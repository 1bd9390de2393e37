"""``python -m bench persons``: its pairs are its own, and it prints both halves with the check
on and off (smoke test; no timing)."""

from __future__ import annotations

import json
from importlib import resources

from bench.bench_persons import load, run


def test_no_phrase_of_the_bank_is_a_pair_or_a_part_of_one() -> None:
    """The person words must not name the evaluation's sentences: each pair is a sentence, the
    bank's phrases are a few words (the relations every language has)."""
    raw = json.loads(
        resources.files("worker.consolidation").joinpath("attributes.json").read_text()
    )
    phrases = {*raw["person_words"]["persons"], *raw["person_words"]["others"]}
    sentences = {text for pair in load() for text in (pair["held"], pair["said"])}
    assert not phrases & sentences
    assert max(len(p.split()) for p in phrases) <= 5


def test_both_halves_hold_pairs_of_two_people_and_of_one() -> None:
    pairs = load()
    for split in ("dev", "test"):
        kinds = {p["same_person"] for p in pairs if p["split"] == split}
        assert kinds == {True, False}
    assert all(p["held"] != p["said"] for p in pairs)


def test_the_bench_prints_both_halves_with_the_check_on_and_off() -> None:
    lines = run()
    for label in ("persons check", "check off"):
        for split in ("dev", "test"):
            assert any(
                line.startswith(f"{label:14} {split:4} two people kept apart") for line in lines
            )
