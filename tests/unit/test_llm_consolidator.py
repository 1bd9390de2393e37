"""The LLM consolidation agent with a scripted chat model."""

from __future__ import annotations

import html
import re

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from tests.support.consolidation_factories import at, cand, entry, state
from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.plan import Reject, consolidate_batch
from worker.errors import ConsolidatorError, InvalidPlan
from worker.models import Candidate
from worker.settings import Settings

FACTS = "/memories/facts.md"
SETTINGS = Settings()


def agent(
    model: ScriptedChatModel, *, budget: int = 12_000, max_removals: int = 20
) -> LLMConsolidator:
    return LLMConsolidator(
        model, token_budget=budget, max_text_bytes=8192, max_removals=max_removals
    )


def add_all(messages: list[BaseMessage]) -> AIMessage:
    """A responder that adds every candidate shown, as a cooperative model would."""
    data = str(messages[1].content)
    found = re.findall(r'<candidate id="(C\d+)"[^>]*>(.*?)</candidate>', data)
    return plan_reply([{"op": "add", "candidates": [c], "path": FACTS, "text": html.unescape(t)}
                       for c, t in found])  # fmt: skip


def test_good_plan_is_validated_and_applied() -> None:
    st = state([entry("e1", "I live in Paris", key="profile.location")])
    batch = [cand("I moved to Rome", minute=1), cand("I have a dog", minute=2)]
    model = ScriptedChatModel(replies=[{"ops": [
        {"op": "supersede", "candidates": ["C1"], "entry": "E1", "text": "I live in Rome"},
        {"op": "add", "candidates": ["C2"], "path": FACTS, "text": "I have a dog"},
    ]}])  # fmt: skip
    plan, applied = consolidate_batch(agent(model), st, batch, now=at(5), settings=SETTINGS,
                                      current_files={})  # fmt: skip
    assert applied.files[0].content == "# Facts\n\n- I live in Rome\n- I have a dog\n"
    assert [row.outcome for row in applied.ledger] == ["merged", "merged"]
    assert plan.llm_calls == 1


def test_one_call_per_batch() -> None:
    model = ScriptedChatModel(responder=add_all)
    agent(model).merge(state(), [cand(f"I own {n} bikes", minute=n) for n in range(20)], now=at(30))
    assert len(model.prompts) == 1


def test_calls_are_tagged_with_the_namespace() -> None:
    model = ScriptedChatModel(responder=add_all)
    agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    call = model.calls[0]
    assert {"memworker", "consolidation"} <= set(call["tags"])
    assert call["metadata"]["namespace"] == "user:u1"
    assert call["tools"] == ["ConsolidationPlan"]


def test_garbage_output_gets_one_repair_then_invalid_plan() -> None:
    model = ScriptedChatModel(replies=[AIMessage("Sure! Here is my plan."), AIMessage("{oops")])
    with pytest.raises(InvalidPlan, match="did not match the ConsolidationPlan schema"):
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert len(model.prompts) == 2


def test_schema_violation_is_repaired_with_the_problems() -> None:
    model = ScriptedChatModel(replies=[
        {"ops": [{"op": "explode", "candidates": ["C1"]}]},
        {"ops": [{"op": "add", "candidates": ["C1"], "path": FACTS, "text": "I have a dog"}]},
    ])  # fmt: skip
    plan = agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert [op.op for op in plan.ops] == ["add"]
    assert "<problems>" in str(model.prompts[1][-1].content)
    assert plan.llm_calls == 2


def test_unaccounted_candidate_is_repaired() -> None:
    batch = [cand("I have a dog", minute=1), cand("I have a cat", minute=2)]
    model = ScriptedChatModel(replies=[
        {"ops": [{"op": "add", "candidates": ["C1"], "path": FACTS, "text": "I have a dog"}]},
        {"ops": [{"op": "add", "candidates": ["C1"], "path": FACTS, "text": "I have a dog"},
                 {"op": "reject", "candidates": ["C2"], "reason": "dull"}]},
    ])  # fmt: skip
    plan = agent(model).merge(state(), batch, now=at(3))
    assert "is not accounted for" in str(model.prompts[1][-1].content)
    assert [op.op for op in plan.ops] == ["add", "reject"]


def test_destructive_plan_is_rejected() -> None:
    entries = [entry(f"e{i}", f"I collect item number {i}") for i in range(6)]
    wipe = {"ops": [{"op": "invalidate", "candidates": ["C1"] if i == 1 else [], "entry": f"E{i}",
                     "reason": "clean-up"} for i in range(1, 7)]}  # fmt: skip
    model = ScriptedChatModel(replies=[wipe, wipe])
    with pytest.raises(InvalidPlan, match="removes 6 existing entries; at most 5"):
        agent(model, max_removals=5).merge(
            state(entries), [cand("forget it all", kind="forget")], now=at(1)
        )


def test_entry_ids_of_another_namespace_are_rejected() -> None:
    theirs = entry("entry-of-user-u2", "I have a dog")
    reply = {"ops": [{"op": "confirm", "candidates": ["C1"], "entry": theirs.id}]}
    model = ScriptedChatModel(replies=[reply, reply])
    with pytest.raises(InvalidPlan, match="unknown entry id entry-of-user-u2"):
        agent(model).merge(
            state([entry("mine", "I have a cat")]), [cand("I have a dog")], now=at(1)
        )


def test_unknown_short_ids_are_rejected() -> None:
    reply = {"ops": [{"op": "confirm", "candidates": ["C1"], "entry": "E7"}]}
    model = ScriptedChatModel(replies=[reply, reply])
    with pytest.raises(InvalidPlan, match="unknown entry id E7"):
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))


def test_secret_fact_is_rejected_without_being_sent() -> None:
    model = ScriptedChatModel(responder=add_all)
    batch = [cand("my password is hunter2", minute=1), cand("I have a dog", minute=2)]
    plan = agent(model).merge(state(), batch, now=at(3))
    assert isinstance(plan.ops[0], Reject)
    assert all("hunter2" not in str(m.content) for m in model.prompts[0])


def test_llm_trying_to_store_a_secret_is_caught() -> None:
    reply = {"ops": [{"op": "add", "candidates": ["C1"], "path": FACTS, "text": "pin: 4321"}]}
    model = ScriptedChatModel(replies=[reply, reply])
    with pytest.raises(InvalidPlan, match="not storable"):
        agent(model).merge(state(), [cand("user: hi", kind="turn")], now=at(1))


def batch_of(n: int) -> list[Candidate]:
    return [
        cand(f"I visited city number {i} in the summer of {1990 + i}", minute=i) for i in range(n)
    ]


def test_batch_over_the_token_budget_is_split_into_several_calls() -> None:
    model = ScriptedChatModel(responder=add_all)
    plan = agent(model, budget=1200).merge(state(), batch_of(40), now=at(60))
    assert len(model.prompts) > 1
    candidates_shown = [str(p[1].content).count("<candidate ") for p in model.prompts]
    assert all(
        count_tokens_approximately(p) <= 1200 or shown == 1  # a chunk holds at least one
        for p, shown in zip(model.prompts, candidates_shown, strict=True)
    )
    assert sorted(cid for op in plan.ops for cid in op.candidate_ids) == sorted(
        c.id for c in batch_of(40)
    )


def test_later_chunks_see_the_entries_of_earlier_ones() -> None:
    model = ScriptedChatModel(responder=add_all)
    agent(model, budget=1200).merge(state(), batch_of(40), now=at(60))
    assert (
        "I visited city number 0 in" in str(model.prompts[-1][1].content).split("<candidates>")[0]
    )


def test_split_plan_applies_cleanly() -> None:
    model = ScriptedChatModel(responder=add_all)
    batch = batch_of(40)
    _, applied = consolidate_batch(agent(model, budget=1200), state(), batch, now=at(60),
                                   settings=SETTINGS, current_files={})  # fmt: skip
    assert len(applied.new_entries) == 40


def test_tokens_are_recorded_from_usage_metadata() -> None:
    reply = plan_reply([{"op": "reject", "candidates": ["C1"], "reason": "dull"}])
    reply.usage_metadata = {"input_tokens": 123, "output_tokens": 45, "total_tokens": 168}
    plan = agent(ScriptedChatModel(replies=[reply])).merge(state(), [cand("x y")], now=at(1))
    assert (plan.llm_calls, plan.prompt_tokens, plan.completion_tokens) == (1, 123, 45)


def test_tokens_are_approximated_without_usage_metadata() -> None:
    model = ScriptedChatModel(responder=add_all, report_usage=False)
    plan = agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert plan.prompt_tokens == count_tokens_approximately(model.prompts[0])
    assert plan.completion_tokens > 0


def test_model_error_becomes_consolidator_error() -> None:
    model = ScriptedChatModel(replies=[TimeoutError("read timed out")])
    with pytest.raises(ConsolidatorError, match="TimeoutError: read timed out"):
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))


def test_model_answers_are_translated_to_real_candidate_ids() -> None:
    model = ScriptedChatModel(replies=[{"ops": [{"op": "reject", "candidates": ["C1"]}]}])
    plan = agent(model).merge(state(), [cand("ok then")], now=at(1))
    assert plan.ops[0].candidate_ids == [cand("ok then").id]
