"""apply_plan: deterministic entries, ledger, approvals, budget eviction, files and diffs."""

from __future__ import annotations

from tests.support.consolidation_factories import at, cand, entry, state
from worker.consolidation.apply import EVICTED_REASON, apply_plan
from worker.consolidation.ids import created_ids
from worker.consolidation.types import Add, Confirm, Invalidate, Plan, Reject, Supersede
from worker.models import Candidate
from worker.values import AppliedPlan, Entry, NamespaceState

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


EVICTION_ENTRIES = [
    entry("old", "old fact " + "x" * 40, minute=-90, confirmations=1),
    entry("newer", "newer fact " + "x" * 40, minute=-30, confirmations=1),
    entry("popular", "popular fact " + "x" * 40, minute=-120, confirmations=5),
]


def evicted_with(budget: int) -> set[str]:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")])
    applied = apply(plan, [C1], state(EVICTION_ENTRIES), budget=budget)
    return {e.id for e in applied.changed_entries if e.invalid_reason == EVICTED_REASON}


def test_eviction_removes_the_oldest_of_the_least_confirmed_first() -> None:
    assert evicted_with(140) == {"old"}


def test_eviction_keeps_well_confirmed_entries_longest() -> None:
    assert evicted_with(100) == {"old", "newer"}


def test_evicted_entries_stay_in_history_with_a_reason() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="I have a dog")])
    applied = apply(plan, [C1], state([entry("e1", "y" * 100)]), budget=60)
    (gone,) = applied.changed_entries
    assert (gone.id, gone.invalid_at, gone.invalid_reason) == ("e1", NOW, EVICTED_REASON)
    assert applied.counts["evicted"] == 1


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
