"""load_consolidator: configuration mistakes surface at start-up, naming the setting."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

import pytest

from tests.support.scripted_model import ScriptedChatModel
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.loading import load_consolidator
from worker.consolidation.plan import Plan
from worker.consolidation.rules import RulesConsolidator
from worker.errors import ConfigurationError
from worker.models import Candidate, NamespaceState
from worker.settings import Settings


class FactsOnly:
    """A custom consolidator that cannot read turns."""

    name: ClassVar[str] = "facts-only"
    needs_model: ClassVar[bool] = False
    handles_turns: ClassVar[bool] = False

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        return Plan()


class NeedsModel(FactsOnly):
    needs_model: ClassVar[bool] = True

    def __init__(self, model: object) -> None:
        self.model = model


class NotAConsolidator:
    pass


HERE = "tests.unit.test_llm_loading"


def test_default_is_the_rules_consolidator() -> None:
    assert isinstance(load_consolidator(Settings().for_consolidation), RulesConsolidator)


def test_rules_consolidator_takes_its_limits_from_settings() -> None:
    built = load_consolidator(Settings(max_removals_per_run=3).for_consolidation)
    assert isinstance(built, RulesConsolidator)
    assert built.max_removals == 3


def test_a_model_switches_the_default_to_the_llm_agent() -> None:
    built = load_consolidator(
        Settings(model_token_budget=999).for_consolidation, model=ScriptedChatModel()
    )
    assert isinstance(built, LLMConsolidator)
    assert built.token_budget == 999


def test_custom_class_is_loaded_by_dotted_path() -> None:
    assert isinstance(
        load_consolidator(Settings(consolidator=f"{HERE}:FactsOnly").for_consolidation), FactsOnly
    )


def test_custom_class_needing_a_model_gets_it() -> None:
    model = ScriptedChatModel()
    built = load_consolidator(
        Settings(consolidator=f"{HERE}:NeedsModel").for_consolidation, model=model
    )
    assert isinstance(built, NeedsModel)
    assert built.model is model


@pytest.mark.parametrize(
    "path",
    ["no_colon_here", "worker.nowhere:Thing", f"{HERE}:Missing", f"{HERE}:NotAConsolidator"],
)
def test_bad_path_names_the_setting(path: str) -> None:
    with pytest.raises(ConfigurationError, match="MEMWORKER_CONSOLIDATOR"):
        load_consolidator(Settings(consolidator=path).for_consolidation)


def test_consolidator_needing_a_model_without_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="needs a chat model; set MEMWORKER_MODEL"):
        load_consolidator(Settings(consolidator=f"{HERE}:NeedsModel").for_consolidation)


def test_model_for_a_consolidator_without_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="MEMWORKER_MODEL is set"):
        load_consolidator(
            Settings(consolidator=f"{HERE}:FactsOnly").for_consolidation, model=ScriptedChatModel()
        )


def test_turns_required_but_not_handled_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="cannot read 'turn' candidates"):
        load_consolidator(
            Settings(consolidator=f"{HERE}:FactsOnly").for_consolidation, require_turns=True
        )


def test_unknown_model_provider_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="MEMWORKER_MODEL='nosuchprovider:m1'"):
        load_consolidator(Settings(model="nosuchprovider:m1").for_consolidation)
