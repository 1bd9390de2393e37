"""The LLM agent's model settings: structured-output method, fallback, deadline, provider kwargs."""

from __future__ import annotations

import html
import logging
import re
import threading
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda
from pydantic import Field

from tests.support.consolidation_factories import at, cand, state
from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.llm import LLMConsolidator, Method, structured_methods
from worker.consolidation.loading import load_consolidator, model_arguments
from worker.errors import (
    ConfigurationError,
    ConsolidatorError,
    InvalidModelPlan,
    InvalidPlan,
    ModelUnavailable,
)
from worker.settings import Settings, load_settings

FACTS = "/memories/facts.md"
LOCAL = "http://127.0.0.1:8080/v1"


class ServerRejected(Exception):
    """What an OpenAI-style SDK raises for an HTTP error answer: it carries the status."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"Error code: {status_code}")
        self.status_code = status_code


class MethodAwareModel(ScriptedChatModel):
    """A scripted model whose server refuses some structured-output methods."""

    rejects: dict[str, BaseException] = Field(default_factory=dict)
    asked: list[str] = Field(default_factory=list)  #: the method of every call, in order

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, method: str = "function_calling"
    ) -> Runnable[Any, Any]:
        inner = super().with_structured_output(schema, include_raw=include_raw)

        def call(messages: Any, config: Any = None) -> Any:
            self.asked.append(method)
            if method in self.rejects:
                raise self.rejects[method]
            return inner.invoke(messages, config=config)

        return RunnableLambda(call)


def add_all(messages: list[BaseMessage]) -> AIMessage:
    found = re.findall(r'<candidate id="(C\d+)"[^>]*>(.*?)</candidate>', str(messages[1].content))
    return plan_reply([{"op": "add", "candidates": [c], "path": FACTS, "text": html.unescape(t)}
                       for c, t in found])  # fmt: skip


def agent(model: ScriptedChatModel, *methods: Method, timeout: float = 30) -> LLMConsolidator:
    return LLMConsolidator(
        model, token_budget=12_000, max_text_bytes=8192, max_removals=20,
        methods=methods or ("function_calling",), timeout_seconds=timeout,
    )  # fmt: skip


# --- choosing the method ---------------------------------------------------------------------
def test_auto_prefers_json_schema_for_openais_own_api() -> None:
    assert structured_methods("auto", provider="openai", base_url=None) == (
        "json_schema",
        "function_calling",
    )


def test_auto_prefers_function_calling_behind_a_base_url() -> None:
    assert structured_methods("auto", provider="openai", base_url=LOCAL)[0] == "function_calling"


def test_an_explicit_method_has_no_fallback() -> None:
    assert structured_methods("json_mode", provider="openai", base_url=None) == ("json_mode",)


def test_an_unknown_method_setting_names_the_variable() -> None:
    with pytest.raises(ConfigurationError, match="MEMWORKER_MODEL_STRUCTURED_METHOD"):
        load_settings(model_structured_method="xml")


def test_the_loader_gives_the_agent_the_methods_and_deadline_of_the_settings() -> None:
    settings = Settings(model="openai:local", model_base_url=LOCAL, model_timeout_seconds=7)
    built = load_consolidator(settings.for_consolidation, model=MethodAwareModel())
    assert isinstance(built, LLMConsolidator)
    assert (built.methods, built.timeout_seconds) == (("function_calling", "json_schema"), 7)


def test_the_configured_method_is_the_one_asked_for() -> None:
    model = MethodAwareModel(responder=add_all)
    agent(model, "json_schema").merge(state(), [cand("I have a dog")], now=at(1))
    assert model.asked == ["json_schema"]


def test_json_mode_shows_the_schema_in_the_instructions() -> None:
    model = MethodAwareModel(responder=add_all)
    agent(model, "json_mode").merge(state(), [cand("I have a dog")], now=at(1))
    instructions = str(model.prompts[0][0].content)
    assert "matches this JSON schema" in instructions
    assert '"ops"' in instructions


def test_other_methods_keep_the_schema_out_of_the_prompt() -> None:
    model = MethodAwareModel(responder=add_all)
    agent(model, "function_calling").merge(state(), [cand("I have a dog")], now=at(1))
    assert "JSON schema" not in str(model.prompts[0][0].content)


# --- falling back once -----------------------------------------------------------------------
def test_a_rejected_method_falls_back_once_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    model = MethodAwareModel(responder=add_all, rejects={"json_schema": ServerRejected(500)})
    consolidator = agent(model, "json_schema", "function_calling")
    with caplog.at_level(logging.WARNING, logger="worker.consolidation.llm"):
        plan = consolidator.merge(state(), [cand("I have a dog")], now=at(1))
    assert [op.op for op in plan.ops] == ["add"]
    assert model.asked == ["json_schema", "function_calling"]
    assert plan.llm_calls == 1  # the refused request produced no answer to count
    assert [r.getMessage() for r in caplog.records if "falling back" in r.getMessage()] != []


def test_the_fallback_is_kept_for_later_batches() -> None:
    model = MethodAwareModel(responder=add_all, rejects={"json_schema": ServerRejected(400)})
    consolidator = agent(model, "json_schema", "function_calling")
    consolidator.merge(state(), [cand("I have a dog")], now=at(1))
    consolidator.merge(state(), [cand("I have a cat")], now=at(2))
    assert model.asked == ["json_schema", "function_calling", "function_calling"]


def test_when_the_fallback_is_rejected_too_the_model_is_unavailable() -> None:
    rejects = {m: ServerRejected(500) for m in ("json_schema", "function_calling")}
    model = MethodAwareModel(responder=add_all, rejects=rejects)
    with pytest.raises(ModelUnavailable, match=r"method function_calling.*Error code: 500"):
        agent(model, "json_schema", "function_calling").merge(
            state(), [cand("I have a dog")], now=at(1)
        )
    assert model.asked == ["json_schema", "function_calling"]


def test_an_explicit_method_rejected_is_unavailable_without_a_second_call() -> None:
    model = MethodAwareModel(responder=add_all, rejects={"json_schema": ServerRejected(500)})
    with pytest.raises(ModelUnavailable, match="structured-output method json_schema"):
        agent(model, "json_schema").merge(state(), [cand("I have a dog")], now=at(1))
    assert model.asked == ["json_schema"]


def test_a_connection_error_is_not_taken_for_a_rejected_method() -> None:
    model = MethodAwareModel(responder=add_all, rejects={"json_schema": ConnectionError("refused")})
    with pytest.raises(ModelUnavailable, match="ConnectionError: refused"):
        agent(model, "json_schema", "function_calling").merge(
            state(), [cand("I have a dog")], now=at(1)
        )
    assert model.asked == ["json_schema"]


def test_infrastructure_failures_are_model_unavailable_not_invalid_plans() -> None:
    model = ScriptedChatModel(replies=[OSError("network unreachable")])
    with pytest.raises(ModelUnavailable) as caught:
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert not isinstance(caught.value, InvalidPlan)


# --- the deadline ----------------------------------------------------------------------------
def test_a_model_that_never_answers_misses_the_deadline() -> None:
    release = threading.Event()

    def hang(messages: list[BaseMessage]) -> AIMessage:
        release.wait(30)
        return add_all(messages)

    started = time.monotonic()
    try:
        with pytest.raises(ModelUnavailable, match=r"within 0\.2 s.*MEMWORKER_MODEL_TIMEOUT"):
            agent(ScriptedChatModel(responder=hang), timeout=0.2).merge(
                state(), [cand("I have a dog")], now=at(1)
            )
    finally:
        release.set()
    assert time.monotonic() - started < 5


def test_a_timeout_raised_by_the_provider_is_reported_as_such() -> None:
    model = ScriptedChatModel(replies=[TimeoutError("read timed out")])
    with pytest.raises(ModelUnavailable, match="TimeoutError: read timed out"):
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))


def test_callbacks_see_the_call_made_under_the_deadline() -> None:
    model = ScriptedChatModel(responder=add_all)
    agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert {"memworker", "consolidation"} <= set(model.calls[0]["tags"])


# --- provider arguments ----------------------------------------------------------------------
def test_base_url_timeout_and_kwargs_reach_the_provider_class() -> None:
    pytest.importorskip("langchain_openai")
    settings = Settings(
        model="openai:local-model", model_base_url=LOCAL, model_timeout_seconds=9,
        model_kwargs={"api_key": "none", "max_retries": 0},
    )  # fmt: skip
    built = load_consolidator(settings.for_consolidation)
    assert isinstance(built, LLMConsolidator)
    chat: Any = built.model
    assert (chat.openai_api_base, chat.request_timeout, chat.max_retries) == (LOCAL, 9, 0)


def test_model_kwargs_are_read_as_json_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMWORKER_MODEL_KWARGS", '{"temperature": 0, "api_key": "none"}')
    assert load_settings().model_kwargs == {"temperature": 0, "api_key": "none"}


def test_model_kwargs_override_the_derived_arguments() -> None:
    settings = Settings(model="openai:m", model_timeout_seconds=9, model_kwargs={"timeout": 1})
    assert model_arguments(settings.for_consolidation)["timeout"] == 1


def test_arguments_the_provider_refuses_are_a_configuration_error() -> None:
    pytest.importorskip("langchain_openai")
    settings = Settings(model="openai:m", model_kwargs={"api_key": "none", "max_retries": "lots"})
    with pytest.raises(ConfigurationError, match="MEMWORKER_MODEL_KWARGS"):
        load_consolidator(settings.for_consolidation)


# --- a rejected plan still costs ---------------------------------------------------------------
def test_a_rejected_plan_carries_the_calls_and_tokens_it_cost() -> None:
    replies = []
    for _ in range(2):
        reply = plan_reply([{"op": "reject", "candidates": ["C9"], "reason": "?"}])
        reply.usage_metadata = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
        replies.append(reply)
    with pytest.raises(InvalidModelPlan) as caught:
        agent(ScriptedChatModel(replies=replies)).merge(state(), [cand("I have a dog")], now=at(1))
    failed = caught.value
    assert (failed.llm_calls, failed.prompt_tokens, failed.completion_tokens) == (2, 200, 20)


class LengthFinishReasonError(Exception):
    """What OpenAI's client raises when a parsed answer hit the length limit."""


def test_an_answer_cut_off_at_the_length_limit_is_repaired_not_unavailable() -> None:
    good = {"ops": [{"op": "add", "candidates": ["C1"], "path": FACTS, "text": "I have a dog"}]}
    model = ScriptedChatModel(replies=[LengthFinishReasonError("length limit"), good])
    plan = agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert [op.op for op in plan.ops] == ["add"]
    assert "cut off at its length limit" in str(model.prompts[1][-1].content)
    assert plan.llm_calls == 2


def test_two_cut_off_answers_are_an_invalid_plan() -> None:
    model = ScriptedChatModel(replies=[LengthFinishReasonError("a"), LengthFinishReasonError("b")])
    with pytest.raises(InvalidModelPlan, match="cut off at its length limit"):
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))


def test_a_request_refused_as_malformed_is_a_failed_batch_not_an_outage() -> None:
    model = MethodAwareModel(responder=add_all, rejects={"function_calling": ServerRejected(400)})
    with pytest.raises(ConsolidatorError, match="would be refused again") as caught:
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))
    assert not isinstance(caught.value, ModelUnavailable)


@pytest.mark.parametrize("status", [401, 429, 500, 503])
def test_outages_and_refused_credentials_are_model_unavailable(status: int) -> None:
    model = MethodAwareModel(
        responder=add_all, rejects={"function_calling": ServerRejected(status)}
    )
    with pytest.raises(ModelUnavailable):
        agent(model).merge(state(), [cand("I have a dog")], now=at(1))
