"""consolidate_batch: merge → validate → apply, one error family for the pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

import pytest

from tests.support.consolidation_factories import at, cand, state
from worker.consolidation.plan import Add, Plan, consolidate_batch
from worker.errors import ConsolidatorError, InvalidPlan
from worker.models import Candidate, NamespaceState
from worker.settings import Settings


class Escaping:
    name: ClassVar[str] = "escaping"
    needs_model: ClassVar[bool] = False
    handles_turns: ClassVar[bool] = False

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        return Plan(ops=[Add(candidate_ids=[c.id], path="/etc/passwd", text="x") for c in batch])


class Crashing(Escaping):
    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        raise KeyError("boom")


def test_invalid_plan_is_raised_with_its_problems() -> None:
    with pytest.raises(InvalidPlan) as info:
        consolidate_batch(Escaping(), state(), [cand("I have a dog")], now=at(1),
                          settings=Settings(), current_files={})  # fmt: skip
    assert any("outside /memories/" in p for p in info.value.problems)


def test_unexpected_consolidator_failure_becomes_consolidator_error() -> None:
    with pytest.raises(ConsolidatorError, match="consolidator 'escaping' failed on user:u1"):
        consolidate_batch(Crashing(), state(), [cand("I have a dog")], now=at(1),
                          settings=Settings(), current_files={})  # fmt: skip


def test_sensitive_paths_from_settings_wait_for_approval() -> None:
    from worker.consolidation.rules import RulesConsolidator

    settings = Settings(sensitive_paths=["/memories/preferences.md"])
    _, applied = consolidate_batch(RulesConsolidator(), state(), [cand("I prefer tea")],
                                   now=at(1), settings=settings, current_files={})  # fmt: skip
    assert [row.outcome for row in applied.ledger] == ["pending_approval"]
