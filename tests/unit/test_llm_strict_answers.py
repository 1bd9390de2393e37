"""A model answer is a plan only when it is complete: nothing cut off is ever completed.

LangChain's parsers complete a cut-off JSON answer (they close an open string and every open
bracket), so an answer cut at ``"text": "I pre`` would add the entry ``I pre``. Each answer
below is cut, or said by its provider to be cut, in one of the ways a real provider delivers
it; each is a failed call: the repair call is told why, and a second one fails the batch.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk

from tests.support.consolidation_factories import at, cand, state
from tests.support.scripted_model import PLAN_TOOL, JsonTextModel, ScriptedChatModel
from worker.consolidation.llm import ConsolidationPlan, LLMConsolidator, Method
from worker.errors import InvalidModelPlan

FACTS = "/memories/facts.md"
TEXT = "I prefer green tea"
PLAN: dict[str, Any] = {
    "ops": [{"op": "add", "candidates": ["C1"], "path": FACTS, "text": TEXT,
             "key": "preference.drink"}]
}  # fmt: skip
WHOLE = json.dumps(PLAN)
STOPPED = {"finish_reason": "stop"}


def agent(model: ScriptedChatModel, method: Method) -> LLMConsolidator:
    return LLMConsolidator(
        model, token_budget=12_000, max_text_bytes=8192, max_removals=20, methods=(method,)
    )


def text_answer(text: str, **ended: str) -> AIMessage:
    return AIMessage(text, response_metadata=ended or STOPPED)


def tool_answer(args: dict[str, Any], **ended: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": PLAN_TOOL, "args": args, "id": "call_1"}],
        response_metadata=ended or STOPPED,
    )  # fmt: skip


def openai_tool_answer(arguments: str) -> AIMessage:
    """A tool call as ``ChatOpenAI`` returns it: the arguments' own text kept beside the parsed
    ones, which a stream's lenient parse completed."""
    completed = json.loads(WHOLE)
    raw = {"id": "call_1", "type": "function",
           "function": {"name": PLAN_TOOL, "arguments": arguments}}  # fmt: skip
    return AIMessage(
        "", tool_calls=[{"name": PLAN_TOOL, "args": completed, "id": "call_1"}],
        additional_kwargs={"tool_calls": [raw]}, response_metadata=STOPPED,
    )  # fmt: skip


def streamed_tool_answer(arguments: str) -> AIMessageChunk:
    """A streamed tool call whose chunks ended early (LangChain parses them leniently)."""
    return AIMessageChunk(
        content="", response_metadata=STOPPED,
        tool_call_chunks=[{"name": PLAN_TOOL, "args": arguments, "id": "call_1", "index": 0}],
    )  # fmt: skip


def cut(at_text: str, keep: int) -> str:
    """The whole answer cut ``keep`` characters into ``at_text``."""
    return WHOLE[: WHOLE.index(at_text) + keep]


#: (method, answer, words the problem must say). Each answer, read leniently, is a valid plan.
CUT_ANSWERS: dict[str, tuple[Method, AIMessage, str]] = {
    "cut inside the text, marked stop": (
        "json_mode", text_answer(cut(TEXT, 5)), "not one complete JSON object"),
    "no closing brace": ("json_mode", text_answer(WHOLE[:-2]), "not one complete JSON object"),
    "the key string cut": (
        "json_mode", text_answer(cut("preference.drink", 14)), "not one complete JSON object"),
    "an unclosed code fence": (
        "json_schema", text_answer("```json\n" + WHOLE), "code fence is not closed"),
    "finish_reason length": (
        "json_mode", text_answer(WHOLE, finish_reason="length"), "cut off at its length limit"),
    "stop_reason length": (
        "function_calling", tool_answer(PLAN, stop_reason="length"), "cut off at its length"),
    "stop_reason max_tokens": (
        "function_calling", tool_answer(PLAN, stop_reason="max_tokens"), "cut off at its length"),
    "Google's MAX_TOKENS": (
        "json_schema", text_answer(WHOLE, finish_reason="MAX_TOKENS"), "cut off at its length"),
    "content filter": (
        "json_mode", text_answer(WHOLE, finish_reason="content_filter"), "stopped by a filter"),
    "tool arguments cut (OpenAI)": (
        "function_calling", openai_tool_answer(cut(TEXT, 5)), "not one complete JSON object"),
    "tool arguments cut (stream)": (
        "function_calling", streamed_tool_answer(cut(TEXT, 5)), "not one complete JSON object"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CUT_ANSWERS))
def test_a_cut_off_answer_is_a_failed_call_and_the_repair_is_told_why(case: str) -> None:
    method, answer, problem = CUT_ANSWERS[case]
    model = JsonTextModel(replies=[answer, text_answer(WHOLE) if "json" in method else
                                   tool_answer(PLAN)])  # fmt: skip

    plan = agent(model, method).merge(state(), [cand(TEXT)], now=at(1))

    repair = str(model.prompts[1][-1].content)
    assert problem in repair
    assert [(op.op, getattr(op, "text", None)) for op in plan.ops] == [("add", TEXT)]
    assert plan.llm_calls == 2


@pytest.mark.parametrize("case", list(CUT_ANSWERS))
def test_two_cut_off_answers_fail_the_batch_naming_why(case: str) -> None:
    method, answer, problem = CUT_ANSWERS[case]
    model = JsonTextModel(replies=[answer, answer])

    with pytest.raises(InvalidModelPlan, match=problem) as failed:
        agent(model, method).merge(state(), [cand(TEXT)], now=at(1))

    assert failed.value.llm_calls == 2


def test_an_answer_read_leniently_would_have_stored_the_cut_text() -> None:
    """The attack itself: what LangChain's parser makes of the answer cut inside a string."""
    model = JsonTextModel(replies=[text_answer(cut(TEXT, 5))])
    result = model.with_structured_output(
        ConsolidationPlan, include_raw=True, method="json_mode"
    ).invoke("plan")
    assert result["parsed"].ops[0].text == "I pre"


@pytest.mark.parametrize(
    "answer",
    [
        text_answer(WHOLE),
        text_answer("```json\n" + WHOLE + "\n```"),
        text_answer("\n  " + WHOLE + "\n"),
        AIMessage([{"type": "text", "text": WHOLE}], response_metadata={"stop_reason": "end_turn"}),
    ],
    ids=["bare", "fenced", "padded", "content blocks, end_turn"],
)
def test_a_complete_text_answer_is_read_as_it_was_written(answer: AIMessage) -> None:
    model = JsonTextModel(replies=[answer])
    plan = agent(model, "json_mode").merge(state(), [cand(TEXT)], now=at(1))
    assert [(op.op, getattr(op, "text", None)) for op in plan.ops] == [("add", TEXT)]
    assert plan.llm_calls == 1


def test_a_complete_openai_tool_call_is_read_from_its_own_arguments() -> None:
    model = JsonTextModel(replies=[openai_tool_answer(WHOLE)])
    plan = agent(model, "function_calling").merge(state(), [cand(TEXT)], now=at(1))
    assert plan.llm_calls == 1


def test_text_after_the_plan_is_not_a_plan() -> None:
    model = JsonTextModel(replies=[text_answer(WHOLE + " I hope this helps!")] * 2)
    with pytest.raises(InvalidModelPlan, match="not one complete JSON object"):
        agent(model, "json_mode").merge(state(), [cand(TEXT)], now=at(1))


def test_two_plan_calls_in_one_answer_are_not_one_plan() -> None:
    twice = AIMessage(
        "", tool_calls=[{"name": PLAN_TOOL, "args": PLAN, "id": f"call_{n}"} for n in (1, 2)]
    )
    model = JsonTextModel(replies=[twice, twice])
    with pytest.raises(InvalidModelPlan, match="expected one ConsolidationPlan call"):
        agent(model, "function_calling").merge(state(), [cand(TEXT)], now=at(1))


def test_a_value_of_the_wrong_type_is_not_coerced() -> None:
    wrong = {"ops": [{"op": "add", "candidates": "C1", "path": FACTS, "text": TEXT}]}
    model = JsonTextModel(replies=[tool_answer(wrong)] * 2)
    with pytest.raises(InvalidModelPlan, match="did not match the ConsolidationPlan schema"):
        agent(model, "function_calling").merge(state(), [cand(TEXT)], now=at(1))
