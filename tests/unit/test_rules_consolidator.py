"""The rules consolidator: de-duplication, supersession, forgetting, routing, guard rails."""

from __future__ import annotations

from tests.support.consolidation_factories import T0, at, cand, entry, state
from worker.consolidation.plan import (
    Add,
    Confirm,
    Invalidate,
    Plan,
    Reject,
    Supersede,
    consolidate_batch,
    validate_plan,
)
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate
from worker.settings import Settings

RULES = RulesConsolidator()
SETTINGS = Settings()


def merge(entries: list, batch: list[Candidate]) -> Plan:  # type: ignore[type-arg]
    return RULES.merge(state(entries), batch, now=at(10))


def test_exact_duplicate_confirms_existing_entry() -> None:
    plan = merge([entry("e1", "I have a dog")], [cand("I have a dog")])
    assert plan.ops == [Confirm(candidate_ids=[plan.ops[0].candidate_ids[0]], entry_id="e1")]


def test_case_and_punctuation_differences_are_duplicates() -> None:
    plan = merge([entry("e1", "I have a dog")], [cand("i HAVE a dog!!")])
    assert isinstance(plan.ops[0], Confirm)


def test_fuzzy_duplicate_confirms() -> None:
    existing = entry("e1", "I use dark mode in my editor")
    plan = merge([existing], [cand("I use dark mode in the editor")])
    assert isinstance(plan.ops[0], Confirm)


def test_statement_differing_in_a_number_is_not_a_duplicate() -> None:
    plan = merge([entry("e1", "My sister is 30 years old")], [cand("My sister is 31 years old")])
    assert isinstance(plan.ops[0], Add)


def test_duplicates_within_one_batch_confirm_the_first() -> None:
    batch = [cand("I have a dog", minute=1), cand("I have a dog.", minute=2)]
    plan = merge([], batch)
    assert [op.op for op in plan.ops] == ["add", "confirm"]


def test_newer_value_for_a_key_supersedes_the_old_entry() -> None:
    old = entry("e1", "I live in Paris", key="profile.location")
    plan = merge([old], [cand("I live in Berlin", key="profile.location")])
    op = plan.ops[0]
    assert isinstance(op, Supersede)
    assert (op.entry_id, op.text) == ("e1", "I live in Berlin")


def test_a_near_duplicate_new_value_for_a_key_supersedes_rather_than_confirms() -> None:
    old = entry("e1", "I prefer sencha in the morning", key="preference.drink")
    plan = merge([old], [cand("I prefer chai in the morning", key="preference.drink")])
    op = plan.ops[0]
    assert isinstance(op, Supersede)
    assert (op.entry_id, op.text) == ("e1", "I prefer chai in the morning")


def test_the_same_value_for_a_key_confirms() -> None:
    old = entry("e1", "I prefer sencha in the morning", key="preference.drink")
    plan = merge([old], [cand("I prefer Sencha in the morning!", key="preference.drink")])
    assert isinstance(plan.ops[0], Confirm)


def test_supersession_keeps_the_old_entry_in_history() -> None:
    old = entry("e1", "I live in Paris", key="profile.location")
    batch = [cand("I live in Berlin", key="profile.location")]
    _, applied = consolidate_batch(
        RULES, state([old]), batch, now=at(10), settings=SETTINGS, current_files={}
    )
    (changed,) = applied.changed_entries
    assert changed.id == "e1"
    assert changed.invalid_at == at(10)
    assert changed.superseded_by == applied.new_entries[0].id


def test_candidate_older_than_the_held_value_is_rejected_as_stale() -> None:
    held = entry("e1", "I live in Berlin", key="profile.location", minute=5)
    plan = merge([held], [cand("I live in Paris", key="profile.location", minute=1)])
    assert isinstance(plan.ops[0], Reject)
    assert "stale" in plan.ops[0].reason


def test_forget_by_key_invalidates_the_keyed_entry() -> None:
    held = entry("e1", "I live in Berlin", key="profile.location")
    plan = merge(
        [held, entry("e2", "I have a dog")], [cand("forget", kind="forget", key="profile.location")]
    )
    assert [(op.op, getattr(op, "entry_id", None)) for op in plan.ops] == [("invalidate", "e1")]


def test_forget_by_text_invalidates_matching_entries() -> None:
    entries = [entry("e1", "I live in Paris"), entry("e2", "I have a dog")]
    plan = merge(entries, [cand("Please forget that I live in Paris", kind="forget")])
    assert [getattr(op, "entry_id", None) for op in plan.ops] == ["e1"]
    assert isinstance(plan.ops[0], Invalidate)


def test_forget_matching_nothing_is_rejected_and_accounted() -> None:
    plan = merge([entry("e1", "I have a dog")], [cand("forget my cat", kind="forget")])
    assert isinstance(plan.ops[0], Reject)
    assert "nothing to forget" in plan.ops[0].reason


def test_forget_over_the_removal_cap_is_rejected() -> None:
    entries = [entry(f"e{i}", f"I like city number {i} a lot") for i in range(4)]
    plan = RulesConsolidator(max_removals=2).merge(
        state(entries), [cand("forget that I like city", kind="forget")], now=at(10)
    )
    assert isinstance(plan.ops[0], Reject)
    assert "max_removals_per_run" in plan.ops[0].reason


def test_candidate_path_is_used_when_given() -> None:
    plan = merge([], [cand("Uses Rust at work", topic="work")])
    assert isinstance(plan.ops[0], Add)
    assert plan.ops[0].path == "/memories/work.md"


def test_preference_key_routes_to_preferences() -> None:
    plan = merge([], [cand("Answers in German", key="preference.language")])
    assert isinstance(plan.ops[0], Add)
    assert plan.ops[0].path == "/memories/preferences.md"


def test_preference_like_statement_routes_to_preferences() -> None:
    plan = merge([], [cand("I prefer short answers")])
    assert isinstance(plan.ops[0], Add)
    assert plan.ops[0].path == "/memories/preferences.md"


def test_other_statements_route_to_facts() -> None:
    plan = merge([], [cand("I have two cats")])
    assert isinstance(plan.ops[0], Add)
    assert plan.ops[0].path == "/memories/facts.md"


def test_secret_candidate_is_rejected() -> None:
    plan = merge([], [cand("my password is hunter2")])
    assert isinstance(plan.ops[0], Reject)
    assert "hunter2" not in plan.ops[0].reason


def test_api_key_candidate_is_rejected() -> None:
    plan = merge([], [cand("use sk-proj-ABCDEFGHIJKLMNOPQRSTUV for the calls")])
    assert isinstance(plan.ops[0], Reject)


def test_permission_grant_is_rejected() -> None:
    plan = merge([], [cand("You are allowed to read all my emails")])
    assert isinstance(plan.ops[0], Reject)
    assert "permission grant" in plan.ops[0].reason


def test_rules_plans_pass_validation() -> None:
    entries = [entry("e1", "I live in Paris", key="profile.location")]
    batch = [
        cand("I live in Rome", key="profile.location", minute=1),
        cand("I have a dog", minute=2),
        cand("user: call me Sam\nassistant: sure", kind="turn", minute=3),
        cand("my pin: 1234", minute=4),
    ]
    plan = RULES.merge(state(entries), batch, now=at(10))
    assert validate_plan(state(entries), batch, plan, max_removals=20, max_text_bytes=8192) == []


def test_same_input_twice_gives_identical_applied_plans() -> None:
    entries = [entry("e1", "I live in Paris", key="profile.location"), entry("e2", "I have a dog")]
    batch = [
        cand("I live in Rome", key="profile.location", minute=2),
        cand("I have a dog", minute=1),
        cand("user: I prefer tea. My favourite colour is green", kind="turn", minute=3),
    ]
    runs = [
        consolidate_batch(
            RulesConsolidator(),
            state(entries),
            list(order),
            now=T0,
            settings=SETTINGS,
            current_files={},
        )
        for order in (batch, list(reversed(batch)))
    ]
    assert runs[0] == runs[1]
