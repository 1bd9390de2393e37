"""Explicit statements from conversation turns, and turn candidates in the rules consolidator."""

from __future__ import annotations

import pytest

from tests.support.consolidation_factories import at, cand, entry, state
from worker.consolidation.plan import Add, Invalidate, Reject
from worker.consolidation.rules import RulesConsolidator, extract_statements


@pytest.mark.parametrize(
    ("user_says", "text", "key"),
    [
        ("Remember that I am allergic to nuts.", "I am allergic to nuts", None),
        ("I prefer answers in bullet points", "I prefer answers in bullet points", None),
        ("Oh, call me Sam!", "Call me Sam", "preference.name"),
        (
            "My favourite colour is green",
            "My favourite colour is green",
            "profile.favourite_colour",
        ),
        ("I live in Lisbon", "I live in Lisbon", "profile.location"),
        ("I work at Acme Corp", "I work at Acme Corp", "profile.employer"),
        ("I work as a nurse", "I work as a nurse", "profile.occupation"),
        ("Please remember that my dog is called Rex", "My dog is called Rex", "profile.dog"),
    ],
)
def test_explicit_statement_is_extracted(user_says: str, text: str, key: str | None) -> None:
    (statement,) = extract_statements(f"user: {user_says}\nassistant: Noted!")
    assert (statement.kind, statement.text, statement.key) == ("fact", text, key)


def test_i_no_longer_becomes_a_forget() -> None:
    (statement,) = extract_statements("user: I no longer live in Paris")
    assert (statement.kind, statement.text) == ("forget", "live in Paris")


@pytest.mark.parametrize(
    "user_says",
    [
        "What is my name?",
        "Remember to buy milk",
        "My question is about taxes",
        "The weather is nice",
        "My friend said I prefer tea",
    ],
)
def test_non_statements_are_ignored(user_says: str) -> None:
    assert extract_statements(f"user: {user_says}") == []


def test_assistant_lines_are_never_read() -> None:
    turn = "user: hello\nassistant: I prefer tea. My name is Robo-like bot"
    assert extract_statements(turn) == []


def test_continuation_lines_belong_to_the_previous_role() -> None:
    turn = "user: hi\nI live in Oslo\nassistant: nice\nI live in Rome"
    assert [s.text for s in extract_statements(turn)] == ["I live in Oslo"]


def test_turn_without_statements_is_rejected_and_accounted() -> None:
    turn = cand("user: what's the time?\nassistant: noon", kind="turn")
    plan = RulesConsolidator().merge(state(), [turn], now=at(1))
    assert plan.ops == [
        Reject(candidate_ids=[turn.id], reason="no explicit statement in the user's lines")
    ]


def test_turn_with_several_statements_adds_each() -> None:
    turn = cand("user: I live in Oslo. I prefer tea.", kind="turn")
    plan = RulesConsolidator().merge(state(), [turn], now=at(1))
    assert [(op.op, getattr(op, "path", None)) for op in plan.ops] == [
        ("add", "/memories/facts.md"),
        ("add", "/memories/preferences.md"),
    ]


def test_turn_secret_sentence_is_dropped_and_the_rest_kept() -> None:
    turn = cand("user: My password is hunter2. I live in Oslo", kind="turn")
    plan = RulesConsolidator().merge(state(), [turn], now=at(1))
    assert [op.text for op in plan.ops if isinstance(op, Add)] == ["I live in Oslo"]


def test_turn_of_only_a_secret_is_rejected() -> None:
    turn = cand("user: my api key is sk-abcdefghijklmnopqrstu", kind="turn")
    plan = RulesConsolidator().merge(state(), [turn], now=at(1))
    assert isinstance(plan.ops[0], Reject)
    assert plan.ops[0].reason.startswith("credential")


def test_turn_i_no_longer_invalidates_the_matching_entry() -> None:
    turn = cand("user: I no longer live in Paris", kind="turn")
    plan = RulesConsolidator().merge(state([entry("e1", "I live in Paris")]), [turn], now=at(1))
    assert plan.ops == [
        Invalidate(candidate_ids=[turn.id], entry_id="e1", reason="forgotten on request")
    ]
