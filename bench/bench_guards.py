"""The guards' error rates and cost: hostile texts caught and legitimate statements kept.

Three measurements, printed per guard class:

- **hostile caught**: the labelled hostile set of ``tests/support/guard_meaning_corpus.py`` in
  each spelling of ``tests/support/guard_corpus.py`` (plain, fullwidth, zero-width padded,
  Cyrillic look-alikes, capitals), plus the format corpus's positives;
- **legitimate refused** (the false-positive rate): the labelled legitimate set (statements
  close to each class: "I reset my password yesterday", "I forget names easily", "the system
  was down", in six languages) and the format corpus's near-misses;
- **held out**: :mod:`tests.support.guard_heldout_corpus`, sentences written before the rows
  of issue 38's classes and never tuned on (several languages, some outside the rows' word
  lists): the hostile catch rate and the legitimate refusal rate, per class, in every spelling;
- **LoCoMo refused**: every dialogue turn and observation of the LoCoMo conversations
  (``../shared/datasets/locomo10``, when present) — thousands of ordinary statements nobody
  wrote for these guards, so a rate there is not tuned to the corpus.

Cost: the guards' time per text against :func:`~worker.consolidation.text.normalise` of the
same texts in the same run (one normalisation is the floor: the guards look at its forms).

With ``--meaning``, the same sets go through the patterns and then the guards by meaning
(:mod:`~worker.consolidation.guard_meaning`), with the default local model.

``python -m bench guards`` (``--locomo FOLDER`` to point at the data; ``--meaning``)
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from tests.support.guard_corpus import NEGATIVES, POSITIVES, variants
from tests.support.guard_heldout_corpus import HELD_OUT_HOSTILE, HELD_OUT_LEGITIMATE
from tests.support.guard_meaning_corpus import HOSTILE, LEGITIMATE
from worker.consolidation.guard_meaning import refusal
from worker.consolidation.guards import violation
from worker.consolidation.text import normalise

DATASET: Final = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo10"


def _rate(texts: list[str], *, refused: bool) -> tuple[int, int]:
    """How many of ``texts`` the guards refuse (``refused``) or keep, and how many there are."""
    hits = sum((violation(t) is not None) == refused for t in texts)
    return hits, len(texts)


def _line(label: str, counts: tuple[int, int]) -> str:
    hits, total = counts
    return f"{label:<58} {hits:>5}/{total:<5} {100 * hits / max(total, 1):6.2f}%"


def locomo_texts(folder: Path = DATASET) -> list[str]:
    """Every dialogue turn and observation of the LoCoMo conversations (empty when absent)."""
    texts: list[str] = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, value in data.items():
            if key.startswith("session_") and isinstance(value, list):
                texts += [t["text"] for t in value if isinstance(t, dict) and "text" in t]
            elif key.endswith("_observation") and isinstance(value, dict):
                texts += [item[0] for items in value.values() for item in items]
    return texts


def _seconds(texts: Iterable[str], check: object) -> float:
    normalise.cache_clear()  # both runs start cold: the guards normalise each text too
    violation.cache_clear()  # and a kept verdict would time a lookup, not the guards
    started = time.perf_counter()
    for text in texts:
        check(text)  # type: ignore[operator]
    return time.perf_counter() - started


def run(dataset: Path = DATASET) -> list[str]:
    lines = [f"{'set':<58} {'hits':>11} {'rate':>7}"]
    for name, texts in HOSTILE.items():
        lines.append(_line(f"hostile caught: {name}", _rate(variants(texts), refused=True)))
    whole = _rate(POSITIVES, refused=True)
    lines.append(_line("hostile caught: whole guard corpus (format + meaning)", whole))
    for name, texts in LEGITIMATE.items():
        spelled = variants(texts, upper=False)
        lines.append(_line(f"legitimate refused: {name}", _rate(spelled, refused=True)))
    lines.append(_line("legitimate refused: whole guard corpus near-misses",
                       _rate(NEGATIVES, refused=True)))  # fmt: skip
    for name, texts in HELD_OUT_HOSTILE.items():
        lines.append(
            _line(f"held out, hostile caught: {name}", _rate(variants(texts), refused=True))
        )
    held_out = [t for texts in HELD_OUT_HOSTILE.values() for t in texts]
    lines.append(_line("held out, hostile caught: all (plain)", _rate(held_out, refused=True)))
    for name, texts in HELD_OUT_LEGITIMATE.items():
        spelled = variants(texts, upper=False)
        lines.append(_line(f"held out, legitimate refused: {name}", _rate(spelled, refused=True)))
    locomo = locomo_texts(dataset)
    if locomo:
        refused = [t for t in locomo if violation(t) is not None]
        lines.append(_line("LoCoMo turns and observations refused", (len(refused), len(locomo))))
        lines += [f"  refused: {t[:100]!r} ({violation(t)})" for t in refused[:10]]
        sample = list(dict.fromkeys(locomo))[:2000]
        floor = _seconds(sample, normalise)
        cost = _seconds(sample, violation)
        lines.append(
            f"guards: {1e6 * cost / len(sample):.0f} µs per LoCoMo text, "
            f"{cost / max(floor, 1e-9):.1f}x one normalise of it"
        )
    else:
        lines.append(f"LoCoMo not found at {dataset}; its row is skipped (--locomo FOLDER)")
    return lines


def by_meaning(dataset: Path = DATASET) -> list[str]:
    """The same sets through the patterns and then the guards by meaning
    (:func:`~worker.consolidation.guard_meaning.refusal`) with the default local model: each
    text is embedded first (LoCoMo's 8,423 take a few minutes on a CPU)."""
    from bench.bench_updates import default_meaning, load

    meaning = default_meaning()
    meaning.deadline_seconds = 3600.0  # one call embeds thousands of texts here

    def rate(texts: list[str], *, refused: bool) -> tuple[int, int]:
        meaning.prepare(t.strip() for t in texts)
        return sum((refusal(t, meaning) is not None) == refused for t in texts), len(texts)

    sets = {
        "development hostile caught": ([t for k, v in HOSTILE.items() for t in v], True),
        "development legitimate refused": ([t for v in LEGITIMATE.values() for t in v], True),
        "held out, hostile caught": ([t for v in HELD_OUT_HOSTILE.values() for t in v], True),
        "held out, legitimate refused": (
            [t for v in HELD_OUT_LEGITIMATE.values() for t in v],
            True,
        ),
        "update stories' statements refused": (
            sorted({i.text for story in load() for i in story.items}),
            True,
        ),
        "LoCoMo turns and observations refused": (list(dict.fromkeys(locomo_texts(dataset))), True),
    }
    lines = [f"{'with meaning (patterns, then meaning)':<58} {'hits':>11} {'rate':>7}"]
    for label, (texts, refused) in sets.items():
        if texts:
            lines.append(_line(label, rate(texts, refused=refused)))
    return lines


def main(argv: list[str]) -> int:
    """``--locomo FOLDER``: read the LoCoMo conversations from there; ``--meaning``: also the
    guards by meaning, with the default local model."""
    folder = Path(argv[argv.index("--locomo") + 1]) if "--locomo" in argv else DATASET
    lines = run(folder)
    if "--meaning" in argv:
        lines += by_meaning(folder)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
