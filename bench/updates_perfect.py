"""The LLM path with a perfect model: a scripted chat model that answers the correct plan.

It reads the prompt the LLM consolidator built (its ``<entry>`` and ``<candidate>`` tags) and
answers what a perfect model would, from the story's own annotations: a statement that
``replaces`` earlier ones supersedes the entry of the newest and invalidates the rest, a
restatement confirms what it ``restates``, a statement ``stale_on_arrival`` is rejected, and
anything else is added. What it cannot do is act on an entry the prompt did not show: that
entry is counted as *unshown* (the ceiling the pipeline leaves a perfect model), and the
statement is added instead. Everything else is the worker's own path: the prompt's choice of
entries, the strict reading of the answer and the trust check on the plan.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from bench.bench_updates import Factory, Item, Story
from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.meaning import Meaning
from worker.settings import Settings
from worker.types import FACTS_PATH

_ENTRY = re.compile(r'<entry id="(E\d+)"[^>]*>(.*?)</entry>', re.S)
_CANDIDATE = re.compile(r'<candidate id="(C\d+)"[^>]*>(.*?)</candidate>', re.S)


@dataclass
class Counts:
    """Entries a correct plan had to touch, and how many of them the prompt did not show."""

    needed: int = 0
    unshown: int = 0


@dataclass
class Oracle:
    """The correct answer to each prompt of one story (see the module notes)."""

    items: dict[str, Item]
    counts: Counts = field(default_factory=Counts)
    #: Texts that have an active entry, as the correct plans left them.
    alive: set[str] = field(default_factory=set)

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        data = str(messages[1].content)
        held = {html.unescape(text): short for short, text in _ENTRY.findall(data)}
        shown = [(short, html.unescape(raw)) for short, raw in _CANDIDATE.findall(data)]
        texts = {text for _, text in shown}
        # Within one prompt: a statement a later one replaces is not added, and a restatement
        # of another candidate is accounted for by that candidate's operation.
        replaced = {old for _, t in shown for old in self.items[t].replaces if old in texts}
        restating = {t: self.items[t].restates for _, t in shown}
        ops: list[dict[str, Any]] = []
        for short, text in shown:
            if text in replaced:
                reason = "replaced by a newer statement in this batch"
                ops.append({"op": "reject", "candidates": [short], "reason": reason})
            elif restating[text] in texts and restating[text] not in replaced:
                continue
            else:
                together = [s for s, t in shown if restating[t] == text]
                ops += self._ops([short, *together], text, held)
        return plan_reply(ops)

    def _ops(self, shorts: list[str], text: str, held: dict[str, str]) -> list[dict[str, Any]]:
        item = self.items[text]
        if item.stale_on_arrival:
            return [{"op": "reject", "candidates": shorts, "reason": "said before what is held"}]
        olds = [o for o in item.replaces if o in self.alive]
        if item.restates is not None and item.restates in self.alive:
            olds = [item.restates]
        self.counts.needed += len(olds)
        shown = [o for o in olds if o in held]
        self.counts.unshown += len(olds) - len(shown)
        if item.restates is not None and shown:
            return [{"op": "confirm", "candidates": shorts, "entry": held[shown[0]]}]
        if not shown:
            self.alive.add(text)
            return [{"op": "add", "candidates": shorts, "path": FACTS_PATH, "text": text}]
        first, *rest = shown
        ops: list[dict[str, Any]] = [
            {"op": "invalidate", "candidates": shorts, "entry": held[o], "reason": "replaced"}
            for o in rest
        ]
        ops.append(
            {"op": "supersede", "candidates": shorts, "entry": held[first], "text": text,
             "reason": "a newer value"}
        )  # fmt: skip
        self.alive -= set(shown)
        self.alive.add(text)
        return ops


class PerfectConsolidator(LLMConsolidator):
    """The LLM consolidator over the :class:`Oracle` model, its counts at hand."""

    counts: Counts


def perfect_factory(meaning: Meaning | None) -> Factory:
    settings = Settings().for_consolidation

    def build(story: Story) -> PerfectConsolidator:
        oracle = Oracle({item.text: item for item in story.items})
        consolidator = PerfectConsolidator(
            ScriptedChatModel(responder=oracle),
            token_budget=settings.model_token_budget,
            max_text_bytes=settings.max_text_bytes,
            max_removals=settings.max_removals_per_run,
            meaning=meaning,
        )
        consolidator.counts = oracle.counts
        return consolidator

    return build
