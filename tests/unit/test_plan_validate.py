"""validate_plan: the guard rails every plan passes before anything is written."""

from __future__ import annotations

from tests.support.consolidation_factories import cand, entry, state
from worker.consolidation.plan import (
    Add,
    Confirm,
    Invalidate,
    Plan,
    Reject,
    Supersede,
    created_ids,
    validate_plan,
)
from worker.models import Candidate

C1 = cand("I have a dog")
C2 = cand("I have a cat")
FACTS = "/memories/facts.md"


def problems(
    plan: Plan,
    batch: list[Candidate] | None = None,
    entries: list | None = None,  # type: ignore[type-arg]
    *,
    max_removals: int = 5,
    max_text_bytes: int = 200,
) -> list[str]:
    return validate_plan(state(entries or []), [C1] if batch is None else batch, plan,
                         max_removals=max_removals, max_text_bytes=max_text_bytes)  # fmt: skip


def test_a_good_plan_has_no_problems() -> None:
    assert problems(Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="Has a dog")])) == []


def test_unaccounted_candidate_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="Has a dog")])
    assert problems(plan, [C1, C2]) == [
        f"candidate {C2.id} is not accounted for; add, confirm or reject it"
    ]


def test_unknown_candidate_id_is_a_problem() -> None:
    plan = Plan(ops=[Reject(candidate_ids=[C1.id, "nope"], reason="dull")])
    assert any("unknown candidate id nope" in p for p in problems(plan))


def test_unknown_entry_id_is_a_problem() -> None:
    plan = Plan(ops=[Confirm(candidate_ids=[C1.id], entry_id="missing")])
    assert any("unknown entry id missing" in p for p in problems(plan))


def test_entry_id_of_another_namespace_is_unknown() -> None:
    theirs = entry("theirs", "I have a dog")
    ours = state([entry("ours", "I have a dog")])
    other = state([theirs], namespace="user:u2")
    plan = Plan(ops=[Confirm(candidate_ids=[C1.id], entry_id="theirs")])
    assert validate_plan(other, [], Plan(), max_removals=1, max_text_bytes=99) == []
    found = validate_plan(ours, [C1], plan, max_removals=1, max_text_bytes=99)
    assert any("unknown entry id theirs" in p for p in found)


def test_candidate_of_another_namespace_is_a_problem() -> None:
    foreign = cand("I have a dog", user="u2")
    plan = Plan(ops=[Reject(candidate_ids=[foreign.id], reason="x")])
    assert any("belongs to namespace user:u2" in p for p in problems(plan, [foreign]))


def test_path_escaping_memories_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path="/memories/../etc/passwd", text="x y")])
    assert any("bad path" in p for p in problems(plan))


def test_path_outside_the_route_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path="/etc/facts.md", text="Has a dog")])
    assert any("outside /memories/" in p for p in problems(plan))


def test_unnormalised_path_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path="facts", text="Has a dog")])
    assert any("is not normalised; use '/memories/facts.md'" in p for p in problems(plan))


def test_too_many_removals_is_a_problem() -> None:
    entries = [entry(f"e{i}", f"fact {i}") for i in range(3)]
    forget = cand("forget my facts", kind="forget")
    ops = [Invalidate(candidate_ids=[forget.id], entry_id=f"e{i}", reason="gone") for i in range(3)]
    found = problems(Plan(ops=ops), [forget], entries=entries, max_removals=2)
    assert found == [
        "the plan removes 3 existing entries; at most 2 may be invalidated or superseded per batch"
    ]


def test_oversize_text_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="x" * 201)])
    assert any("201 bytes; the limit is 200" in p for p in problems(plan))


def test_empty_text_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="   ")])
    assert any("text is empty" in p for p in problems(plan))


def test_secret_text_is_a_problem() -> None:
    plan = Plan(ops=[Add(candidate_ids=[C1.id], path=FACTS, text="password: hunter2")])
    assert any("not storable" in p and "hunter2" not in p for p in problems(plan))


def test_rejected_candidate_used_elsewhere_is_a_problem() -> None:
    plan = Plan(ops=[Reject(candidate_ids=[C1.id], reason="x"),
                     Add(candidate_ids=[C1.id], path=FACTS, text="Has a dog")])  # fmt: skip
    assert any("rejected and also used" in p for p in problems(plan))


def test_entry_invalidated_twice_is_a_problem() -> None:
    ops = [Invalidate(candidate_ids=[C1.id], entry_id="e1", reason="a"),
           Invalidate(candidate_ids=[], entry_id="e1", reason="b")]  # fmt: skip
    assert any("no longer active" in p for p in problems(Plan(ops=ops), entries=[entry("e1", "x")]))


def test_op_may_refer_to_an_entry_created_earlier_in_the_plan() -> None:
    add = Add(candidate_ids=[C1.id], path=FACTS, text="Has a dog")
    (new_id,) = created_ids("user:u1", [add])
    plan = Plan(ops=[add, Confirm(candidate_ids=[C2.id], entry_id=str(new_id))])
    assert problems(plan, [C1, C2]) == []


def test_superseding_a_same_plan_entry_is_not_a_removal() -> None:
    add = Add(candidate_ids=[C1.id], path=FACTS, text="Has a dog")
    (new_id,) = created_ids("user:u1", [add])
    sup = Supersede(candidate_ids=[C2.id], entry_id=str(new_id), text="Has a cat")
    assert problems(Plan(ops=[add, sup]), [C1, C2], max_removals=0) == []
