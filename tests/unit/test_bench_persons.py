"""``python -m bench persons``: its pairs are its own, and it prints both halves with the checks
on and off (smoke test; no timing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from bench.bench_persons import (
    ATTRIBUTE_PAIRS,
    DISTINCT_PAIRS,
    RELATIVE_PAIRS,
    SETTING_PAIRS,
    SEVERAL_PAIRS,
    VALUE_PAIRS,
    WORK_PAIRS,
    load,
    run,
)
from bench.bench_updates import load as load_stories
from worker.consolidation.meaning import _swapped


def _attributes() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        resources.files("worker.consolidation").joinpath("attributes.json").read_text()
    )
    return loaded


def _bank_texts() -> set[str]:
    """Every text of the bank the meaning checks are read from: the kinds' examples, the
    pairs that draw its directions, its words."""

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    return set(walk(_attributes()))


def _pair_texts(pairs: list[dict[str, Any]]) -> set[str]:
    """Both sentences of every pair."""
    return {text for p in pairs for text in (p["held"], p["said"])}


def _told() -> set[str]:
    """Every sentence of the update stories."""
    return {item.text for story in load_stories() for item in story.items}


def _bank() -> dict[str, list[str]]:
    raw = _attributes()
    return {**raw["person_words"], "settings": raw["setting_words"]["settings"]}


def _bank_phrases(*sections: str) -> set[str]:
    bank = _bank()
    return {phrase for section in sections for phrase in bank[section]}


def test_no_phrase_of_the_bank_is_a_pair_or_a_part_of_one() -> None:
    """The bank's words must not name the evaluation's sentences: each pair is a sentence, the
    bank's phrases are a few words (the relations, places and things every language has)."""
    phrases = _bank_phrases("persons", "wording", "things", "settings")
    pairs = [*load(), *load(VALUE_PAIRS), *load(SETTING_PAIRS), *load(SEVERAL_PAIRS)]
    sentences = {text for pair in pairs for text in (pair["held"], pair["said"])}
    assert not phrases & sentences
    assert max(len(p.split()) for p in phrases) <= 5


@pytest.mark.parametrize(
    ("path", "sections"),
    [
        (VALUE_PAIRS, ("things", "wording")),
        (SETTING_PAIRS, ("settings",)),
        (SEVERAL_PAIRS, ("things", "wording")),
    ],
    ids=["values", "settings", "several"],
)
def test_no_phrase_of_the_bank_is_a_value_or_setting_of_the_test_half(
    path: Path, sections: tuple[str, ...]
) -> None:
    """What a test pair says in place of the held words is in no list its check reads: no
    thing or wording of a new value, no setting of two settings."""
    lowered = {p.lower() for p in _bank_phrases(*sections)}
    swapped = {
        phrase
        for pair in load(path)
        if pair["split"] == "test"
        for swap in _swapped(pair["held"], pair["said"])
        for phrase in swap
    }
    assert swapped
    assert not swapped & lowered


def test_both_halves_hold_pairs_of_two_people_and_of_one() -> None:
    pairs = load()
    for split in ("dev", "test"):
        kinds = {p["same_person"] for p in pairs if p["split"] == split}
        assert kinds == {True, False}
    assert all(p["held"] != p["said"] for p in pairs)


def test_the_bench_prints_both_halves_with_the_checks_on_and_off() -> None:
    lines = run()
    for label in ("checks on", "checks off"):
        for split in ("dev", "test"):
            (line,) = [x for x in lines if x.startswith(f"{label:10} {split:4} two people")]
            assert "a new value kept visible" in line
            assert "a title and an employer kept apart" in line
            assert "two of several values kept" in line
            assert "one value of two attributes kept twice" in line
        (probe,) = [x for x in lines if x.startswith(f"{label:10} probe")]
        assert "the newer of a past and a present kept visible" in probe
        assert "two relatives in other words kept apart" in probe
        assert "one relative in other words kept once" in probe


def test_the_work_pairs_are_none_of_the_stories_nor_the_kinds_examples() -> None:
    """The pairs of a job title and an employer check a class the fit never saw: no sentence
    of theirs is an update story's or an example the kinds are read from."""
    raw = _attributes()
    examples = {text for kind in raw["classes"] for text in kind["examples"]}
    told = _told()
    sentences = {text for pair in load(WORK_PAIRS) for text in (pair["held"], pair["said"])}
    assert len(sentences) == 2 * len(load(WORK_PAIRS))
    assert not sentences & (examples | told)


def test_both_halves_hold_two_facts_of_work_and_changes_of_job() -> None:
    pairs = load(WORK_PAIRS)
    for split in ("dev", "test"):
        assert {p["two_facts"] for p in pairs if p["split"] == split} == {True, False}


def test_the_change_pairs_name_no_sentence_the_benches_score() -> None:
    """The pairs the change direction is drawn from (``change_pairs``) are none of the update
    stories' sentences nor of the pairs ``bench persons`` merges: its threshold is chosen on
    those, and their test halves report it."""
    raw = _attributes()
    drawn = {text for pair in raw["change_pairs"]["pairs"] for text in pair}
    told = _told()
    pairs = [*load(), *load(VALUE_PAIRS), *load(SETTING_PAIRS), *load(WORK_PAIRS)]
    scored = {text for pair in pairs for text in (pair["held"], pair["said"])}
    assert drawn
    assert not drawn & (told | scored)


def test_the_several_pairs_are_none_of_the_stories_nor_the_kinds_examples() -> None:
    """Two values of one attribute that holds several, and one said again: no sentence of
    theirs is an update story's or an example the kinds are read from."""
    examples = {text for kind in _attributes()["classes"] for text in kind["examples"]}
    pairs = load(SEVERAL_PAIRS)
    assert not _pair_texts(pairs) & (examples | _told())
    assert all(p["held"] != p["said"] for p in pairs)


def test_both_halves_hold_two_of_several_values_and_one_said_again() -> None:
    pairs = load(SEVERAL_PAIRS)
    for split in ("dev", "test"):
        assert {p["two_values"] for p in pairs if p["split"] == split} == {True, False}


def test_both_halves_hold_two_attributes_of_one_value_and_one_said_again() -> None:
    pairs = load(ATTRIBUTE_PAIRS)
    for split in ("dev", "test"):
        assert {p["two_attributes"] for p in pairs if p["split"] == split} == {True, False}
    assert all(p["held"] != p["said"] for p in pairs)


def test_the_attribute_pairs_of_the_test_half_are_no_text_of_the_bank() -> None:
    """The same value of two attributes is told apart by the attributes the kinds' examples
    draw: no sentence of the test half is a text of the bank (a few short ones of the
    development half are, "I live in Leeds.")."""
    test = [p for p in load(ATTRIBUTE_PAIRS) if p["split"] == "test"]
    assert test
    assert not _pair_texts(test) & _bank_texts()


def test_the_distinct_probe_is_no_text_of_the_bank() -> None:
    """The probe of distinct facts and of a past beside a present was written after the checks
    and is never tuned on: no sentence of it is a text of the bank the checks are read from (a
    few short ones are also update-story sentences, "I live in Bristol.", which no check
    reads)."""
    pairs = load(DISTINCT_PAIRS)
    assert {p["past"] for p in pairs} == {True, False}
    assert not _pair_texts(pairs) & _bank_texts()


def test_the_relatives_probe_holds_both_kinds_and_no_text_of_the_bank() -> None:
    """The probe of relatives named in other words was written after the checks and is never
    tuned on: it holds pairs of two relatives and of one, and no text of the bank."""
    pairs = load(RELATIVE_PAIRS)
    assert {p["same_person"] for p in pairs} == {True, False}
    assert all(p["split"] == "probe" and p["held"] != p["said"] for p in pairs)
    assert not _pair_texts(pairs) & _bank_texts()
