"""apply_plan: deterministic entries, ledger, approvals, files within a budget, and diffs."""

from __future__ import annotations

from tests.support.consolidation_factories import at, cand, entry, state
from worker.consolidation.plan import (
    Add,
    Confirm,
    Invalidate,
    Plan,
    Reject,
    Supersede,
    apply_plan,
    created_ids,
)
from worker.consolidation.render import entry_line, pointer_line
from worker.models import AppliedPlan, Candidate, Entry, NamespaceState, make_candidate

FACTS = "/memories/facts.md"
PREFS = "/memories/preferences.md"
C1 = cand("I have a dog", minute=1)
C2 = cand("I have a cat", minute=2)
NOW = at(10)


def apply(
    plan: Plan,
    batch: list[Candidate],
    st: NamespaceState | None = None,
    *,
    files: dict[str, str] | None = None,
    budget: int = 10_000,
    sensitive: tuple[str, ...] = (),
) -> AppliedPlan:
    return apply_plan(st or state(), batch, plan, now=NOW, current_files=files or {},
                      file_budget_bytes=budget, sensitive_paths=sensitive)  # fmt: skip


def test_entry_ids_are_the_same_on_replay() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")])
    assert apply(plan, [C1]).new_entries[0].id == apply(plan, [C1]).new_entries[0].id


def test_entry_ids_differ_per_namespace() -> None:
    ops = [Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")]
    assert created_ids("user:u1", ops) != created_ids("user:u2", ops)


def test_new_entry_carries_provenance_and_times() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog", key="pet")])
    (new,) = apply(plan, [C1]).new_entries
    assert (new.candidate_ids, new.trace_ids, new.key) == ((C1.id,), ("trace-u1",), "pet")
    assert (new.valid_from, new.created_at, new.last_confirmed_at) == (at(1), NOW, NOW)


def test_a_new_entry_is_valid_from_when_its_candidate_was_said() -> None:
    said = make_candidate(
        user_id="u1", trace_id="t", text="I moved to Lyon", occurred_at=at(-60), now=at(1)
    )
    plan = Plan(ops=[Add(candidate_ids=[said.id], path=FACTS, text="I moved to Lyon")])

    (new,) = apply(plan, [said]).new_entries

    assert (new.valid_from, new.created_at) == (at(-60), NOW)


def test_a_new_entry_is_valid_from_its_earliest_candidates_event_time() -> None:
    late = make_candidate(user_id="u1", trace_id="t", text="Lyon", occurred_at=at(-30), now=at(1))
    early = make_candidate(user_id="u1", trace_id="t", text="Lyon", occurred_at=at(-90), now=at(2))
    plan = Plan(ops=[Add(candidate_ids=[late.id, early.id], path=FACTS, text="Lyon")])

    (new,) = apply(plan, [late, early]).new_entries

    assert new.valid_from == at(-90)


def test_confirmation_counts_and_touches_last_confirmed() -> None:
    st = state([entry("e1", "I have a dog", confirmations=2)])
    applied = apply(Plan(ops=[Confirm(candidate_ids=[C1.id], entry_id="e1")]), [C1], st)
    (changed,) = applied.changed_entries
    assert (changed.confirmations, changed.last_confirmed_at) == (3, NOW)
    assert applied.ledger[0].outcome == "duplicate"


def test_confirmation_alone_changes_no_file() -> None:
    st = state([entry("e1", "I have a dog")])
    assert apply(Plan(ops=[Confirm(candidate_ids=[C1.id], entry_id="e1")]), [C1], st).files == ()


def test_supersede_invalidates_and_links_the_old_entry() -> None:
    st = state([entry("e1", "I have a dog", key="pet")])
    op = Supersede(candidate_ids=[C2.id], entry_id="e1", text="I have a cat", reason="moved on")
    applied = apply(Plan(ops=[op]), [C2], st)
    (old,), (new,) = applied.changed_entries, applied.new_entries
    assert (old.invalid_at, old.invalid_reason, old.superseded_by) == (NOW, "moved on", new.id)
    assert (new.key, new.path) == ("pet", FACTS)


def test_ops_on_read_only_paths_wait_for_approval() -> None:
    st = state(read_only=[PREFS])
    applied = apply(Plan(ops=[Add(candidate_ids=[C1.id], path=PREFS, text="Tea")]), [C1], st)
    assert applied.new_entries == ()
    assert [(a.path, a.candidate_ids) for a in applied.approvals] == [(PREFS, (C1.id,))]
    assert applied.ledger[0].outcome == "pending_approval"


def test_ops_on_sensitive_paths_wait_for_approval() -> None:
    st = state([entry("e1", "I have a dog", path="/memories/health.md")])
    op = Invalidate(candidate_ids=[C1.id], entry_id="e1", reason="forget")
    applied = apply(Plan(ops=[op]), [C1], st, sensitive=("/memories/health.md",))
    assert (applied.changed_entries, applied.counts["pending_approval"]) == ((), 1)


def test_op_depending_on_a_waiting_op_waits_too() -> None:
    add = Add(candidate_ids=[C1.id], path=PREFS, text="Tea")
    (new_id,) = created_ids("user:u1", [add])
    plan = Plan(ops=[add, Confirm(candidate_ids=[C2.id], entry_id=str(new_id))])
    applied = apply(plan, [C1, C2], state(read_only=[PREFS]))
    assert [row.outcome for row in applied.ledger] == ["pending_approval", "pending_approval"]


#: Three long entries of equal confirmations and a well-confirmed one; the batch adds a dog.
BUDGET_ENTRIES = [
    entry("old", "old fact " + "x" * 100, minute=-90),
    entry("middle", "middle fact " + "x" * 100, minute=-60),
    entry("newer", "newer fact " + "x" * 100, minute=-30),
    entry("popular", "popular fact " + "x" * 100, minute=-120, confirmations=5),
]


def left_out_with(budget: int) -> set[str]:
    """Ids of the entries the facts file leaves out at ``budget`` (``dog``: the new one)."""
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")])
    applied = apply(plan, [C1], state(BUDGET_ENTRIES), budget=budget)
    (facts,) = applied.files
    assert len(facts.content.encode()) <= budget
    (dog,) = applied.new_entries
    named = {e.id: e.id for e in BUDGET_ENTRIES} | {dog.id: "dog"}
    everything = [*BUDGET_ENTRIES, dog]
    return {named[e.id] for e in everything if f"- {entry_line(e.text)}" not in facts.content}


def test_a_file_over_budget_leaves_out_the_oldest_of_the_least_confirmed_first() -> None:
    assert left_out_with(440) == {"old"}


def test_a_file_over_budget_keeps_well_confirmed_entries_longest() -> None:
    assert left_out_with(350) == {"old", "middle"}
    assert left_out_with(250) == {"old", "middle", "newer"}


def test_entries_left_out_of_a_file_stay_active() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")])
    applied = apply(plan, [C1], state([entry("e1", "y" * 300)]), budget=256)
    assert applied.changed_entries == ()
    assert applied.counts["evicted"] == 1
    assert applied.files[0].content.endswith(f"\n\n{pointer_line(1)}\n")


def test_every_candidate_gets_one_ledger_row() -> None:
    c3 = cand("forget the dog", kind="forget", minute=3)
    st = state([entry("e1", "I have a dog")])
    plan = Plan(ops=[
        Add(candidate_ids=[C1.id], path=FACTS, text="I have a ferret"),
        Reject(candidate_ids=[C2.id], reason="dull"),
        Invalidate(candidate_ids=[c3.id], entry_id="e1", reason="forgotten on request"),
    ])  # fmt: skip
    ledger = apply(plan, [C1, C2, c3], st).ledger
    assert [(r.candidate_id, r.outcome) for r in ledger] == [
        (C1.id, "merged"), (C2.id, "rejected"), (c3.id, "forgotten"),
    ]  # fmt: skip


def test_counts_summarise_the_plan() -> None:
    st = state([entry("e1", "I have a dog"), entry("e2", "Lives in Oslo", key="loc")])
    c3, c4 = cand("x", minute=3), cand("y", minute=4)
    plan = Plan(ops=[
        Confirm(candidate_ids=[C1.id], entry_id="e1"),
        Supersede(candidate_ids=[C2.id], entry_id="e2", text="Lives in Rome"),
        Add(candidate_ids=[c3.id], path=FACTS, text="Has a cat"),
        Reject(candidate_ids=[c4.id], reason="dull"),
    ])  # fmt: skip
    assert apply(plan, [C1, C2, c3, c4], st).counts == {
        "added": 1, "superseded": 1, "duplicates": 1, "forgotten": 0, "rejected": 1,
        "evicted": 0, "pending_approval": 0,
    }  # fmt: skip


def test_files_and_diffs_only_for_changed_paths() -> None:
    st = state([entry("e1", "I have a dog")])
    files = {FACTS: "# Facts\n\n- I have a dog\n", PREFS: "# Preferences\n"}
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a cat")])
    (change,) = apply(plan, [C1], st, files=files).files
    assert change.path == FACTS
    assert change.content == "# Facts\n\n- I have a dog\n- I have a cat\n"
    assert "+- I have a cat\n" in change.diff
    assert change.previous_content == files[FACTS]


def test_unchanged_rendering_is_not_a_file_change() -> None:
    st = state([entry("e1", "I have a dog")])
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a cat"),
                     Invalidate(candidate_ids=[C2.id], entry_id="e1", reason="x")])  # fmt: skip
    current = {FACTS: "# Facts\n\n- I have a cat\n"}
    assert apply(plan, [C1, C2], st, files=current).files == ()


def test_applying_twice_gives_equal_results() -> None:
    st = state([entry("e1", "I have a dog")])
    plan = Plan(ops=[Confirm(candidate_ids=[C1.id], entry_id="e1"),
                     Add(candidate_ids=[C2.id], path=FACTS, text="I have a cat")])  # fmt: skip
    assert apply(plan, [C1, C2], st) == apply(plan, [C1, C2], st)


def test_entry_type_round_trips_through_json() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")])
    (new,) = apply(plan, [C1]).new_entries
    assert Entry.model_validate_json(new.model_dump_json()) == new
