"""Merge-only timings of the rules consolidator (no queue, no database), for ``consolidation``.

Two figures, each a ratio of two timings taken in the same run:

- **adversarial / typical**: 200 candidates of ~8 KB each. *Typical*: unrelated texts.
  *Adversarial*: word shuffles of one text — equal lengths, equal characters and equal words,
  so every cheap filter passes and every pair needs a real comparison (the case that made
  difflib take 91 s for 12 texts). Both batches hold the same number of bytes.
- **after / before**: merge throughput on a typical chat batch (40 short candidates against
  300 entries) with the current matcher (rapidfuzz's bounded ``Indel`` distance) and with the
  pairwise difflib matcher it replaced (:class:`LegacyNearDuplicateOf`, the old rule); the
  adversarial case is timed for the legacy matcher on a reduced batch only (it is hours at 200).
"""

from __future__ import annotations

import gc
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from difflib import SequenceMatcher
from typing import Final

from worker.consolidation import guards, rules, text
from worker.consolidation import text as _text
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, Entry, NamespaceState, make_candidate

T0: Final = datetime(2025, 1, 1, tzinfo=UTC)
BATCH: Final = 200
TEXT_BYTES: Final = 8000
#: Candidates of the reduced adversarial batch the legacy matcher is timed on.
LEGACY_ADVERSARIAL: Final = 4


class LegacyNearDuplicateOf:
    """The replaced rule: difflib ratio ≥ 0.9 with its two quick upper bounds first."""

    def __init__(self, b: text.Normalised) -> None:
        self.b = b
        self.matcher = SequenceMatcher(None, b.text, b.text, autojunk=False)

    def __call__(self, a: text.Normalised) -> bool:
        b = self.b
        if not a.text or not b.text:
            return False
        if a.text == b.text:
            return True
        la, lb = len(a.text), len(b.text)
        if min(la, lb) < text.MIN_FUZZY_CHARS or a.numbers != b.numbers or a.negated != b.negated:
            return False
        if 2.0 * min(la, lb) / (la + lb) < text.DUPLICATE_RATIO:
            return False
        common = (Counter(a.text) & Counter(b.text)).total()
        if 2.0 * common / (la + lb) < text.DUPLICATE_RATIO:
            return False
        self.matcher.set_seq1(a.text)
        return self.matcher.ratio() >= text.DUPLICATE_RATIO


@contextmanager
def legacy_matcher() -> Iterator[None]:
    """Run the rules consolidator with the difflib matcher it used before."""
    current = rules.text.NearDuplicateOf
    rules.text.NearDuplicateOf = LegacyNearDuplicateOf  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        rules.text.NearDuplicateOf = current  # type: ignore[misc]


def _words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(n)]


def _fit(words: list[str]) -> str:
    return " ".join(words)[:TEXT_BYTES].rsplit(" ", 1)[0]


def typical_texts(count: int, seed: int = 1) -> list[str]:
    """``count`` unrelated ~8 KB texts."""
    rng = random.Random(seed)
    return [_fit(rng.choices(_words(rng, 400), k=1500)) for _ in range(count)]


def adversarial_texts(count: int, seed: int = 2) -> list[str]:
    """``count`` word shuffles of one ~8 KB text: every cheap filter passes every pair."""
    rng = random.Random(seed)
    base = _fit(rng.choices(_words(rng, 400), k=1500)).split(" ")
    out = []
    for _ in range(count):
        rng.shuffle(base)
        out.append(" ".join(base))
    return out


def batch(texts: list[str]) -> list[Candidate]:
    return [make_candidate(user_id="bench", trace_id=f"t{i}", text=t, idempotency_key=f"k{i}",
                           now=T0 + timedelta(seconds=i), max_text_bytes=16384)
            for i, t in enumerate(texts)]  # fmt: skip


def chat_case(seed: int = 3) -> tuple[NamespaceState, list[Candidate]]:
    """300 short entries and 40 short candidates (some near-duplicates of entries)."""
    rng = random.Random(seed)
    subjects = ("My sister", "Our dog", "The dentist", "My manager", "I", "My flatmate")
    verbs = ("prefers", "likes", "repairs", "avoids", "collects", "never eats")
    objects = ("vintage bicycles", "spicy food", "green tea", "dark mode", "board games")
    tails = ("in Lisbon", "on weekends", "after work", "since 2019", "at 7 am", "")

    def sentence() -> str:
        words = (rng.choice(subjects), rng.choice(verbs), rng.choice(objects), rng.choice(tails))
        return " ".join(w for w in (*words, str(rng.randint(1, 99))) if w)

    entries = tuple(
        Entry(id=f"e{i}", path="/memories/facts.md", text=sentence(), valid_from=T0,
              created_at=T0, last_confirmed_at=T0)
        for i in range(300)
    )  # fmt: skip
    texts = [rng.choice(entries).text + rng.choice(("", "!", " too")) if rng.random() < 0.3
             else sentence() for _ in range(40)]  # fmt: skip
    return NamespaceState("user:bench", 1, None, entries=entries), batch(texts)


def seconds(run: Callable[[], object], rounds: int = 1) -> float:
    """Best wall time of ``rounds`` runs (the collector off while each runs, see :func:`_timed`)."""
    return min(_timed(run) for _ in range(rounds))


def _timed(run: Callable[[], object]) -> float:
    """Wall time of one ``run``, with earlier garbage collected first and the collector off
    during it (as :mod:`timeit` does): otherwise a collection of other objects lands in some
    runs and not others, and decides which figure is larger."""
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        run()
        return time.perf_counter() - started
    finally:
        gc.enable()


def merge_lines() -> list[str]:
    """The merge-only figures (see the module notes)."""
    consolidator = RulesConsolidator(max_text_bytes=16384)
    empty = NamespaceState("user:bench", 0, None)
    typical, adversarial = batch(typical_texts(BATCH)), batch(adversarial_texts(BATCH))

    def merge(b: list[Candidate], st: NamespaceState = empty) -> Callable[[], object]:
        def once() -> object:
            _forget_forms()  # each round derives every normal form afresh
            return consolidator.merge(st, b, now=T0)

        return once

    t_typ, t_adv = seconds(merge(typical), 2), seconds(merge(adversarial), 2)
    small = adversarial[:LEGACY_ADVERSARIAL]
    new_small = seconds(merge(small), 3)
    chat_state, chat = chat_case()
    new_chat = seconds(merge(chat, chat_state), 5)
    warm_chat = _warm_entries(consolidator, chat_state, chat)
    first_chat = seconds(_first_batch(consolidator, chat_state, chat), 5)
    with legacy_matcher():
        old_small = seconds(merge(small))
        old_chat = seconds(merge(chat, chat_state), 5)
    pairs = LEGACY_ADVERSARIAL * (LEGACY_ADVERSARIAL - 1) // 2
    return [
        f"merge only, {BATCH} candidates x ~{TEXT_BYTES // 1000} KB:",
        f"  typical batch (unrelated texts)           {t_typ:8.2f} s",
        f"  adversarial batch (word shuffles)         {t_adv:8.2f} s",
        f"  adversarial / typical: {t_adv / t_typ:.1f}x",
        f"  legacy difflib on {LEGACY_ADVERSARIAL} adversarial texts ({pairs} pairs): "
        f"{old_small:.2f} s vs {new_small:.3f} s now ({old_small / new_small:,.0f}x faster)",
        f"  chat batch (40 vs 300 entries): {len(chat) / new_chat:,.0f} candidates/s, "
        f"{len(chat) / old_chat:,.0f} with the difflib matcher: {old_chat / new_chat:.2f}x",
        f"  chat batch, every form cold: {new_chat / len(chat) * 1e6:,.0f} us per candidate; "
        f"entries' forms kept from the previous batch: {warm_chat / len(chat) * 1e6:,.0f} us; "
        f"every text cache empty (a worker's first batch of the namespace): "
        f"{first_chat / len(chat) * 1e6:,.0f} us",
    ]


def _forget_forms() -> None:
    """Drop every kept normal form, so the next merge derives them afresh."""
    text.canonical.cache_clear()
    text.normalise.cache_clear()
    text._normalised.cache_clear()
    guards.violation.cache_clear()


def _forget_texts() -> None:
    """Drop everything kept per text, not only the normal forms: the frames, content terms (and
    the terms of single tokens) and paraphrase keys too, as in a worker that has not seen the
    namespace's entries yet (the tables built once per process, such as the guards' screen,
    stay)."""
    _forget_forms()
    for kept in (_text.frame_of, _text.content_stems, _text.spaced, _text.terms,
                 _text.token_term, _text.paraphrase_key):  # fmt: skip
        kept.cache_clear()


def _first_batch(
    consolidator: RulesConsolidator, state: NamespaceState, chat: list[Candidate]
) -> Callable[[], object]:
    def once() -> object:
        _forget_texts()
        return consolidator.merge(state, chat, now=T0)

    return once


def _warm_entries(
    consolidator: RulesConsolidator, state: NamespaceState, chat: list[Candidate], rounds: int = 5
) -> float:
    """Best merge time with the entries' forms kept (the steady state: a namespace's entries
    are re-read with each batch) and the candidates' forms derived afresh (they are new)."""
    best = float("inf")
    for _ in range(rounds):
        _forget_forms()
        for entry in state.entries:
            text.Normalised.of(entry.text)
        best = min(best, _timed(lambda: consolidator.merge(state, chat, now=T0)))
    return best
