"""The quality harness (``python -m bench llm_quality``): its report, and that every metric moves.

Deliberately broken consolidators run through the same streams as the rules baseline; each one
must score worse on the metric its fault is about, so a metric that cannot move would fail here.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from bench.bench_llm_quality import Report, evaluate, main
from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.plan import Add, Invalidate, Plan, Reject
from worker.consolidation.rules import RulesConsolidator
from worker.errors import InvalidPlan
from worker.models import Candidate, Kind, NamespaceState

METRICS = {
    "latest_value_accuracy", "stale_values_visible", "stale_rate", "duplicate_entries",
    "wrongly_invalidated", "wrongly_invalidated_rate", "calls_per_candidate",
    "prompt_tokens_per_candidate", "completion_tokens_per_candidate", "candidates", "batches",
    "failed_batches",
}  # fmt: skip
STREAMS = ["update", "duplicate", "forget", "contradiction", "paraphrase", "conflict"]
USERS = 2
ROOT = Path(__file__).resolve().parents[2]


class AddsEverything(RulesConsolidator):
    """Stores every statement as a new entry: no confirm, no supersede, forgets ignored."""

    name: ClassVar[str] = "adds-everything"

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        return Plan(ops=[
            Reject(candidate_ids=[c.id], reason="ignored") if c.kind is Kind.FORGET
            else Add(candidate_ids=[c.id], path="/memories/facts.md", text=c.text)
            for c in batch
        ])  # fmt: skip


class RejectsEverything(RulesConsolidator):
    name: ClassVar[str] = "rejects-everything"

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        return Plan(ops=[Reject(candidate_ids=[c.id], reason="no") for c in batch])


class ForgetsEverything(RulesConsolidator):
    """The rules, except that any forget request retires every entry (over-eager forgetting)."""

    name: ClassVar[str] = "forgets-everything"

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        forgets = [c for c in batch if c.kind is Kind.FORGET]
        if not forgets:
            return super().merge(state, batch, now=now)
        ids = [c.id for c in forgets]
        rest = [c for c in batch if c.kind is not Kind.FORGET]
        wipe = [Invalidate(candidate_ids=ids, entry_id=e.id, reason="forget")
                for e in state.entries if e.active]  # fmt: skip
        return Plan(ops=[*wipe, *super().merge(state, rest, now=now).ops])


class AlwaysInvalid(RulesConsolidator):
    name: ClassVar[str] = "always-invalid"

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        raise InvalidPlan(["broken on purpose"])


def cooperative(messages: list[BaseMessage]) -> AIMessage:
    found = re.findall(r'<candidate id="(C\d+)"[^>]*>(.*?)</candidate>', str(messages[1].content))
    return plan_reply([{"op": "add", "candidates": [c], "path": "/memories/facts.md",
                        "text": html.unescape(t)} for c, t in found])  # fmt: skip


@pytest.fixture(scope="module")
def baseline() -> dict[str, Any]:
    return evaluate(RulesConsolidator(), users=USERS).as_json()


def total(consolidator: Any) -> dict[str, Any]:
    report: dict[str, Any] = evaluate(consolidator, users=USERS).as_json()
    return dict(report["total"])


def test_the_report_has_every_metric_for_every_stream_and_in_total(
    baseline: dict[str, Any],
) -> None:
    assert list(baseline["streams"]) == STREAMS
    for metrics in [*baseline["streams"].values(), baseline["total"]]:
        assert set(metrics) == METRICS
    assert baseline["consolidator"] == "rules"
    assert baseline["total"]["candidates"] == sum(
        s["candidates"] for s in baseline["streams"].values()
    )


def test_the_rules_baseline_spends_no_model_calls(baseline: dict[str, Any]) -> None:
    assert baseline["total"]["calls_per_candidate"] == 0
    assert baseline["total"]["failed_batches"] == 0


def test_the_table_has_a_row_per_stream_and_a_total() -> None:
    lines = evaluate(RulesConsolidator(), users=1).table()
    assert [line.split()[0] for line in lines[2:]] == [*STREAMS, "total"]


def test_rejecting_everything_loses_the_latest_values(baseline: dict[str, Any]) -> None:
    broken = total(RejectsEverything())
    assert broken["latest_value_accuracy"] == 0 < baseline["total"]["latest_value_accuracy"]


def test_adding_everything_shows_stale_values_and_duplicates(baseline: dict[str, Any]) -> None:
    broken = total(AddsEverything())
    assert broken["stale_values_visible"] > baseline["total"]["stale_values_visible"]
    assert broken["duplicate_entries"] > baseline["total"]["duplicate_entries"]


def test_over_eager_forgetting_is_counted_as_wrongly_invalidated(
    baseline: dict[str, Any],
) -> None:
    assert baseline["streams"]["forget"]["wrongly_invalidated"] == 0
    broken = total(ForgetsEverything())
    assert broken["wrongly_invalidated"] > 0
    assert broken["wrongly_invalidated_rate"] > baseline["total"]["wrongly_invalidated_rate"]


def test_a_failing_consolidator_fails_every_batch() -> None:
    broken = total(AlwaysInvalid())
    assert broken["failed_batches"] == broken["batches"] > 0
    assert broken["latest_value_accuracy"] == 0


def test_a_model_consolidator_is_charged_its_calls_and_tokens() -> None:
    agent = LLMConsolidator(
        ScriptedChatModel(responder=cooperative), token_budget=12_000, max_text_bytes=8192,
        max_removals=20,
    )  # fmt: skip
    scored = total(agent)
    assert scored["calls_per_candidate"] > 0
    assert scored["prompt_tokens_per_candidate"] > scored["completion_tokens_per_candidate"] > 0


def test_main_prints_the_report_as_json() -> None:
    printed: list[str] = []
    assert main(["--json", "--users", "1"], out=printed.append) == 0
    report = json.loads("\n".join(printed))
    assert (report["consolidator"], report["model"], report["users_per_stream"]) == (
        "rules", None, 1,
    )  # fmt: skip


def test_bad_model_kwargs_are_refused_with_exit_2() -> None:
    printed: list[str] = []
    assert main(["--model-kwargs", "{not json"], out=printed.append) == 2
    assert "--model-kwargs must be a JSON object" in printed[0]


def test_python_m_bench_passes_options_to_the_harness() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "llm_quality", "--json", "--users", "1"],
        capture_output=True, text=True, timeout=120, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list(json.loads(done.stdout)["streams"]) == STREAMS


def test_report_totals_add_up_the_streams() -> None:
    report: Report = evaluate(RulesConsolidator(), users=1)
    assert report.total().candidates == sum(s.candidates for s in report.streams.values())


def test_the_calls_of_failed_batches_are_charged_too() -> None:
    agent = LLMConsolidator(
        ScriptedChatModel(responder=lambda _m: AIMessage("no plan today")), token_budget=12_000,
        max_text_bytes=8192, max_removals=20,
    )  # fmt: skip
    scored = total(agent)
    assert scored["failed_batches"] == scored["batches"]
    assert scored["calls_per_candidate"] > 0
