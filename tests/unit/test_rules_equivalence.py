"""The indexed duplicate search gives the same answers and plans as the pairwise original.

The reference below is the straightforward rule (normalise both texts and build a fresh
``SequenceMatcher`` for every pair); the consolidator caches per entry and reuses one matcher
per candidate, which must never change a decision.
"""

from __future__ import annotations

import random
from difflib import SequenceMatcher

import pytest

from tests.support.consolidation_factories import at, cand, entry, state
from worker.consolidation import rules, text
from worker.consolidation.plan import Invalidate, Plan
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, Entry

SUBJECTS = ("My sister", "Our dog", "The dentist", "My manager", "I", "My flatmate")
VERBS = ("prefers", "likes", "repairs", "avoids", "collects", "does not like", "never eats")
OBJECTS = ("vintage bicycles", "spicy food", "green tea", "dark mode", "board games", "jazz")
TAILS = ("in Lisbon", "on weekends", "after work", "", "since 2019", "at 7 am", "twice a week")
KEYS = (None, None, None, "profile.food", "preference.editor")


def reference_near_duplicate(a: str, b: str) -> bool:
    """The rule as first written: every feature recomputed, a new matcher per pair."""
    na, nb = text.normalise(a), text.normalise(b)
    if na == nb:
        return True
    if min(len(na), len(nb)) < text.MIN_FUZZY_CHARS:
        return False
    if text._DIGITS.findall(na) != text._DIGITS.findall(nb):
        return False
    if text._polarity(na.split()) != text._polarity(nb.split()):
        return False
    ea, eb = text._entities(a), text._entities(b)  # named entities differ: not the same memory
    if ea is not None and eb is not None and ea != eb:
        return False
    return SequenceMatcher(None, na, nb, autojunk=False).ratio() >= text.DUPLICATE_RATIO


def reference_duplicate_of(
    self: rules._Merge, body: str, key: str | None, **_: object
) -> rules._Live | None:
    comparable = [e for e in self.live.values() if key is None or e.key in (None, key)]
    wanted = text.normalise(body)
    for e in comparable:
        if text.normalise(e.text) == wanted:
            return e
    for e in comparable:
        if reference_near_duplicate(e.text, body):
            return e
    return None


def reference_forget(
    self: rules._Merge, cand: Candidate, *, key: str | None, target: str
) -> str | None:
    if key is not None:
        matches = [e for e in self.live.values() if e.key == key]
    elif len(text.normalise(target)) < rules.MIN_FORGET_CHARS:
        return "forget target too short to match safely; forget by key instead"
    else:
        matches = [
            e
            for e in self.live.values()
            if text.contains_phrase(e.text, target) or reference_near_duplicate(e.text, target)
        ]
    if not matches:
        return "nothing to forget: no active entry matches"
    for e in matches:
        self.ops.append(
            Invalidate(candidate_ids=[cand.id], entry_id=e.id, reason="forgotten on request")
        )
        self._drop_live(e)
    return None


def sentence(rng: random.Random) -> str:
    words = [rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(TAILS)]
    return " ".join(w for w in words if w)


def perturb(rng: random.Random, s: str) -> str:
    """A variant of ``s`` that is often, but not always, a near-duplicate."""
    choice = rng.randrange(7)
    if choice == 0:
        return s.upper() + "!"
    if choice == 1 and len(s) > 3:
        i = rng.randrange(len(s))
        return s[:i] + s[i + 1 :]
    if choice == 2:
        return s.replace(" the ", " my ").replace(" a ", " the ")
    if choice == 3:
        return s + " " + rng.choice(("too", "again", "now", "not"))
    if choice == 4:
        return s.replace("7", "8").replace("2019", "2020")
    if choice == 5:
        return rng.choice(("Not ", "Never ", "")) + s
    return sentence(rng)


def texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(count):
        out.append(perturb(rng, rng.choice(out)) if out and rng.random() < 0.6 else sentence(rng))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_near_duplicate_matches_the_pairwise_rule(seed: int) -> None:
    sample = texts(seed, 60)
    for b in sample:
        same = text.NearDuplicateOf(text.Normalised.of(b))
        for a in sample:
            assert same(text.Normalised.of(a)) == reference_near_duplicate(a, b), (a, b)
            assert text.is_near_duplicate(a, b) == reference_near_duplicate(a, b), (a, b)


def plans(
    entries: list[Entry], batch: list[Candidate], monkeypatch: pytest.MonkeyPatch
) -> tuple[Plan, Plan]:
    consolidator = RulesConsolidator(max_removals=1000)
    fast = consolidator.merge(state(entries), batch, now=at(500))
    with monkeypatch.context() as patched:
        patched.setattr(rules._Merge, "_duplicate_of", reference_duplicate_of)
        patched.setattr(rules._Merge, "_forget", reference_forget)
        slow = consolidator.merge(state(entries), batch, now=at(500))
    return fast, slow


@pytest.mark.parametrize("seed", range(4))
def test_batch_against_many_entries_gives_the_same_plan(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(1000 + seed)
    pool = texts(seed, 400)
    entries = [
        entry(f"e{i}", s, key=rng.choice(KEYS), minute=-600 + i) for i, s in enumerate(pool[:300])
    ]
    batch = [
        cand(s, key=rng.choice(KEYS), minute=i, kind="forget" if rng.random() < 0.05 else "fact")
        for i, s in enumerate(pool[300:])
    ]
    fast, slow = plans(entries, batch, monkeypatch)
    assert fast == slow
    kinds = {op.op for op in fast.ops}
    assert {
        "add",
        "confirm",
        "invalidate",
        "supersede",
    } <= kinds  # the sample exercises both exact and fuzzy paths
