"""Is the same fact of two people kept as two facts? Pairs of statements merged by the rules.

``bench/data/person_pairs.jsonl`` holds pairs of a held statement and a new one, in English,
German, Spanish, French, Chinese, Japanese, Hindi, Hinglish and Russian, split into a
development half (:attr:`~worker.consolidation.meaning.Thresholds.person` is chosen on it) and a
test half (reported, never tuned on):

- **two people**: the same said of another person ("Mon frère habite à Nantes" / "Mon oncle
  habite à Nantes"): both must stay;
- **one person**: the same person's fact said again in other words: one entry must stay (the
  held one confirmed, or replaced by the new wording).

Each pair is merged with the default meaning model as the worker does, and, as the baseline in
the same run, with the persons check off (the rules before it). ``python -m bench persons``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support.consolidation_factories import at, cand, entry, state
from worker.consolidation.meaning import Meaning, Thresholds
from worker.consolidation.plan import Add, Confirm, Supersede
from worker.consolidation.rules import RulesConsolidator
from worker.runtime.embeddings import build_embeddings
from worker.types import DEFAULT_EMBEDDINGS

PAIRS = Path(__file__).parent / "data" / "person_pairs.jsonl"
#: A person bar no phrase reaches: the persons check off.
OFF = float("inf")


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in PAIRS.read_text("utf-8").splitlines() if line]


def kept_right(rules: RulesConsolidator, pair: dict[str, Any]) -> bool:
    """Whether merging the pair leaves what it should: both entries for two people, one for
    one person."""
    plan = rules.merge(state([entry("e1", pair["held"])]), [cand(pair["said"])], now=at(10))
    kinds = [type(op) for op in plan.ops]
    if pair["same_person"]:
        return kinds in ([Confirm], [Supersede])
    return kinds == [Add]


def score(rules: RulesConsolidator, pairs: list[dict[str, Any]], same: bool) -> str:
    wanted = [p for p in pairs if p["same_person"] is same]
    return f"{sum(kept_right(rules, p) for p in wanted)}/{len(wanted)}"


def run() -> list[str]:
    built = build_embeddings(DEFAULT_EMBEDDINGS)
    assert built is not None
    every, lines = load(), []
    for label, bar in (("persons check", Thresholds().person), ("check off", OFF)):
        thresholds = replace(Thresholds(), person=bar)
        rules = RulesConsolidator(meaning=Meaning(built, thresholds=thresholds))
        for split in ("dev", "test"):
            pairs = [p for p in every if p["split"] == split]
            lines.append(
                f"{label:14} {split:4} two people kept apart {score(rules, pairs, False)}, "
                f"one person kept once {score(rules, pairs, True)}"
            )
    return lines
