"""One candidate never fails its batch: an oversized conversation turn, or a candidate the
provider refuses, is set aside with its reason and the innocent candidates are merged.

A scripted chat model stands in for the paid provider; it answers HTTP 400 the way a provider
refuses a request (too large, or content it will not take).
"""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from tests.support.consolidation_factories import at, cand, state
from tests.support.scripted_model import ScriptedChatModel
from tests.unit.test_llm_consolidator import add_all, agent
from worker.consolidation.plan import consolidate_batch
from worker.errors import ConsolidatorError
from worker.settings import Settings

SETTINGS = Settings()
BUDGET = 1_500
INNOCENT = ["I have a dog", "I live in Oslo", "I prefer tea"]


class ProviderRefused(Exception):
    """What an SDK raises for an HTTP 400 answer."""

    status_code = 400


def _refusing(marker: str):  # type: ignore[no-untyped-def]
    def respond(messages: list[BaseMessage]) -> AIMessage:
        if marker in str(messages[1].content):
            raise ProviderRefused("Error code: 400 - the request was refused")
        return add_all(messages)

    return respond


def _context_limited(messages: list[BaseMessage]) -> AIMessage:
    """A provider whose context holds the budget: a longer prompt is answered with HTTP 400."""
    if count_tokens_approximately(messages) > BUDGET:
        raise ProviderRefused("Error code: 400 - the prompt is longer than the context")
    return add_all(messages)


def test_an_oversized_turn_is_set_aside_unsent_and_the_innocent_candidates_are_merged() -> None:
    model = ScriptedChatModel(responder=_context_limited)
    turn = cand("user: " + "here is my whole diary " * 340, kind="turn", minute=1, ident="diary")
    batch = [cand(t, minute=i + 2) for i, t in enumerate(INNOCENT)] + [turn]

    _, applied = consolidate_batch(agent(model, budget=BUDGET), state(), batch, now=at(9),
                                   settings=SETTINGS, current_files={})  # fmt: skip

    outcomes = {row.candidate_id: (row.outcome, row.reason) for row in applied.ledger}
    assert outcomes[turn.id][0] == "rejected"
    assert f"over the model's budget of {BUDGET}" in str(outcomes[turn.id][1])
    assert sorted(e.text for e in applied.new_entries) == sorted(INNOCENT)
    assert not any("whole diary" in str(p[1].content) for p in model.prompts)


def test_a_candidate_the_provider_refuses_alone_is_set_aside_and_the_others_merged() -> None:
    model = ScriptedChatModel(responder=_refusing("POISON"))
    poison = cand("I like POISON ivy", minute=1)
    batch = [poison] + [cand(t, minute=i + 2) for i, t in enumerate(INNOCENT)]

    _, applied = consolidate_batch(agent(model, budget=BUDGET), state(), batch, now=at(9),
                                   settings=SETTINGS, current_files={})  # fmt: skip

    outcomes = {row.candidate_id: (row.outcome, row.reason) for row in applied.ledger}
    assert outcomes[poison.id][0] == "rejected"
    assert re.search("set aside: .*refused", str(outcomes[poison.id][1]))
    assert sorted(e.text for e in applied.new_entries) == sorted(INNOCENT)


def test_a_provider_refusing_every_request_fails_the_batch_and_rejects_nothing() -> None:
    model = ScriptedChatModel(responder=_refusing("<candidate"))
    batch = [cand(t, minute=i) for i, t in enumerate(INNOCENT)]

    with pytest.raises(ConsolidatorError, match="refused"):
        agent(model, budget=BUDGET).merge(state(), batch, now=at(9))
