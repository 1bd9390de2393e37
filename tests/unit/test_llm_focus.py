"""Of a large memory, the consolidation prompt shows only the entries a batch can touch."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from tests.support.consolidation_factories import at, cand, entry, state
from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.llm import NEAREST_CAP, NEAREST_PER_CANDIDATE, SHOW_ALL, LLMConsolidator
from worker.errors import InvalidPlan
from worker.models import Candidate, Entry

#: More entries than the prompt shows in full, none of them about dogs or languages.
FILLER = [entry(f"e{i}", f"I visited museum number {i} in town {i}") for i in range(SHOW_ALL + 60)]
DOG = entry("dog", "I have a dog named Rex")


def add_first(_messages: list[BaseMessage]) -> AIMessage:
    return plan_reply([{"op": "add", "candidates": ["C1"], "text": "x"}])


def prompt_for(entries: list[Entry], candidate: Candidate) -> str:
    """The data message the model is sent for one candidate merged into ``entries``."""
    model = ScriptedChatModel(responder=add_first)
    agent = LLMConsolidator(model, token_budget=12_000, max_text_bytes=8192, max_removals=20)
    agent.merge(state(entries), [candidate], now=at(1))
    return str(model.prompts[0][1].content)


def test_a_small_memory_is_shown_whole() -> None:
    data = prompt_for([*FILLER[: SHOW_ALL - 1], DOG], cand("I like tea"))
    assert data.count("<entry ") == SHOW_ALL


def test_a_large_memory_shows_only_the_nearest_entries() -> None:
    data = prompt_for([*FILLER, DOG], cand("My dog Rex turned ten"))
    assert "I have a dog named Rex" in data
    assert data.count("<entry ") == NEAREST_CAP


def test_a_large_batch_is_shown_its_share_of_nearest_entries_per_candidate() -> None:
    batch = [cand(f"I visited a gallery on day {i}") for i in range(10)]
    every = [f"C{i + 1}" for i in range(len(batch))]
    model = ScriptedChatModel(
        responder=lambda _m: plan_reply([{"op": "reject", "candidates": every, "reason": "no"}])
    )
    agent = LLMConsolidator(model, token_budget=12_000, max_text_bytes=8192, max_removals=20)
    agent.merge(state(FILLER), batch, now=at(1))
    assert str(model.prompts[0][1].content).count("<entry ") == NEAREST_PER_CANDIDATE * len(batch)


def test_the_holder_of_the_candidates_key_is_shown_beyond_the_cap() -> None:
    held = entry("lang", "Replies in French please", key="preference.language")
    data = prompt_for([*FILLER, held], cand("Use German", key="preference.language"))
    assert "Replies in French please" in data
    assert data.count("<entry ") == NEAREST_CAP + 1


def test_an_entry_not_shown_cannot_be_named_by_the_plan() -> None:
    unshown = f"E{NEAREST_CAP + 1}"  # one past the short ids the prompt gave out
    model = ScriptedChatModel(
        responder=lambda _m: plan_reply(
            [{"op": "invalidate", "candidates": ["C1"], "entry": unshown, "reason": "forget"}]
        )
    )
    agent = LLMConsolidator(model, token_budget=12_000, max_text_bytes=8192, max_removals=20)
    with pytest.raises(InvalidPlan, match=f"unknown entry id {unshown}"):
        agent.merge(state([*FILLER, DOG]), [cand("forget my dog Rex", kind="forget")], now=at(1))
