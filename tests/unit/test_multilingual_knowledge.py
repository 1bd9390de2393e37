"""The rules consolidator keeps facts right in every script of the multilingual corpus.

All eleven scripts of :mod:`tests.support.multilingual_corpus` share one namespace, so a wrong
merge across scripts counts too. Three batches, each applied before the next is merged, as
consecutive runs would: (1) every fact and each key's first value; (2) the confirmations, each
key's later values, and a stale value that arrives late; (3) the forgets. Every entry and
confirmation is tracked by its text, so a wrong merge, a wrong forget and a stale win are each
visible on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.support.consolidation_factories import at, cand, state
from tests.support.multilingual_corpus import CORPUS
from worker.consolidation.plan import (
    Add,
    Confirm,
    Invalidate,
    Plan,
    Reject,
    Supersede,
    advance,
    apply_plan,
    created_ids,
)
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, NamespaceState

FACTS_TOTAL = sum(len(s.facts) for s in CORPUS)


@dataclass
class Run:
    """The three batches merged and applied; what each op did, by the texts involved."""

    plans: list[Plan] = field(default_factory=list)
    batches: list[list[Candidate]] = field(default_factory=list)
    states: list[NamespaceState] = field(default_factory=list)
    text_of: dict[str, str] = field(default_factory=dict)  #: entry id → its text
    ids: dict[str, str] = field(default_factory=dict)  #: candidate label → candidate id

    def make(self, label: str, text: str, **fields: object) -> Candidate:
        made = cand(text, ident=label, **fields)  # type: ignore[arg-type]
        self.ids[label] = made.id
        return made


def _merge(run: Run, st: NamespaceState, batch: list[Candidate], minute: int) -> NamespaceState:
    plan = RulesConsolidator(max_removals=1000).merge(st, batch, now=at(minute))
    for op, new_id in zip(plan.ops, created_ids(st.namespace, plan.ops), strict=True):
        if isinstance(op, Add | Supersede) and new_id is not None:
            run.text_of[new_id] = op.text
    applied = apply_plan(st, batch, plan, now=at(minute), current_files={},
                         file_budget_bytes=10_000_000, sensitive_paths=())  # fmt: skip
    run.plans.append(plan)
    run.batches.append(batch)
    new = advance(st, applied)
    run.states.append(new)
    return new


@pytest.fixture(scope="module")
def run() -> Run:
    out = Run()
    first = [out.make(f"{s.name}-fact-{i}", f, minute=i)
             for s in CORPUS for i, f in enumerate(s.facts)]  # fmt: skip
    first += [out.make(f"{s.name}-u0", s.updates[0], key=s.key, minute=50) for s in CORPUS]
    st = _merge(out, state(), first, 100)
    second = [out.make(f"{s.name}-confirm-{n}", c, minute=200 + n)
              for s in CORPUS for n, (c, _) in enumerate(s.confirms)]  # fmt: skip
    for s in CORPUS:
        second += [out.make(f"{s.name}-u{n}", v, key=s.key, minute=200 + 10 * n)
                   for n, v in enumerate(s.updates[1:], start=1)]  # fmt: skip
        second.append(out.make(f"{s.name}-stale", s.stale, key=s.key, minute=40))
    st = _merge(out, st, second, 300)
    third = [out.make(f"{s.name}-forget-{n}", t, kind="forget", minute=400 + n)
             for s in CORPUS for n, (t, _) in enumerate(s.forgets)]  # fmt: skip
    _merge(out, st, third, 500)
    return out


def _ops_of(plan: Plan, candidate_id: str) -> list[object]:
    return [op for op in plan.ops if candidate_id in op.candidate_ids]


def test_the_corpus_has_every_script_the_issue_names() -> None:
    names = {s.name for s in CORPUS}
    assert names == {"Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Chinese",
                     "Japanese", "Korean", "Thai", "Emoji"}  # fmt: skip
    assert FACTS_TOTAL >= 70


def test_every_distinct_fact_is_stored_as_its_own_entry(run: Run) -> None:
    added = [op.text for op in run.plans[0].ops if isinstance(op, Add) and op.key is None]
    wrong_merges = [op for op in run.plans[0].ops if isinstance(op, Confirm | Reject)]
    assert wrong_merges == []
    assert sorted(added) == sorted(f for s in CORPUS for f in s.facts)


def test_each_restatement_confirms_exactly_its_own_fact(run: Run) -> None:
    wanted = {run.ids[f"{s.name}-confirm-{n}"]: s.facts[index]
              for s in CORPUS for n, (_, index) in enumerate(s.confirms)}  # fmt: skip
    got = {}
    for op in run.plans[1].ops:
        if isinstance(op, Confirm):
            (cid,) = op.candidate_ids
            got[cid] = run.text_of.get(op.entry_id, "?")
    assert got == wanted


def test_the_newest_value_of_every_key_wins(run: Run) -> None:
    final = run.states[-1]
    right = 0
    for s in CORPUS:
        held = [e.text for e in final.entries if e.key == s.key]
        right += held == [s.updates[-1]]
    assert right / len(CORPUS) >= 0.99


def test_a_late_older_value_is_rejected_as_stale_in_every_script(run: Run) -> None:
    plan = run.plans[1]
    for s in CORPUS:
        (op,) = _ops_of(plan, run.ids[f"{s.name}-stale"])
        assert isinstance(op, Reject), s.name
        assert op.reason.startswith("stale"), s.name


def test_a_forget_removes_only_the_fact_it_names(run: Run) -> None:
    plan = run.plans[2]
    removed = sorted(run.text_of.get(op.entry_id, "?") for op in plan.ops
                     if isinstance(op, Invalidate))  # fmt: skip
    assert removed == sorted(s.facts[i] for s in CORPUS for _, i in s.forgets)
    assert not [op for op in plan.ops if isinstance(op, Reject)]
