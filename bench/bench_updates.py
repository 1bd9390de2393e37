"""Does the memory say what is true today? Update stories merged batch by batch, then scored.

``bench/data/update_stories.jsonl`` holds short stories of one user each (moves, job changes,
corrections, preference flips, diets, pets, relatives; in English, German, Spanish, French,
Chinese, Japanese, Hindi, Portuguese and mixed), split by story into a development half (the
thresholds of :mod:`worker.consolidation.meaning` are chosen on it) and a test half (reported,
never tuned on). Each item may say which earlier items it ``replaces`` (a new value of the same
attribute), which one it ``restates`` (the same thing in other words), or that it was said
``days_before`` it arrived and is ``stale_on_arrival``.

Each story's batches go through the same merge → validate → apply the worker runs, into an
in-memory state; the score reads which candidate made each active entry (its provenance):

- **stale visible**: a replaced (or stale-on-arrival) statement still has its own active entry;
- **paraphrases twice**: a restatement and what it restates both have active entries;
- **facts lost**: a statement that should stay (nothing replaced it) has no entry of its own
  and was not merged into the one it restates (``current`` lost and ``distinct`` lost apart).

Modes: ``rules`` (the default set-up: rules with the default meaning model), ``rules-nomeaning``
(``MEMWORKER_EMBEDDINGS=none``), ``perfect`` (the LLM consolidator with a scripted model that
answers the correct plan: the ceiling the pipeline leaves a perfect model), and each with
``+150`` unrelated facts already held. ``python -m bench updates --mode rules --split test``;
``--held-pairs`` shows how near the merge models come to retiring a held fact.

The LLM path with a perfect model: a scripted chat model that answers the correct plan.

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

import argparse
import html
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage

from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.meaning import MERGE_MODEL_FILE, Meaning, MergeModel
from worker.consolidation.plan import Consolidator, advance, consolidate_batch
from worker.consolidation.rules import MEANING_NEIGHBOURS, RulesConsolidator
from worker.errors import BatchFailed
from worker.models import Candidate, Entry, NamespaceState, make_candidate
from worker.service.sweep import prepare_merges
from worker.settings import Settings
from worker.types import FACTS_PATH

DATA = Path(__file__).parent / "data" / "update_stories.jsonl"
#: When the first batch arrives; each later batch a day after the one before.
T0 = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(days=1)
#: Unrelated facts a user already holds in the ``+150`` modes.
HELD = 150


@dataclass(frozen=True)
class Item:
    text: str
    replaces: tuple[str, ...] = ()
    restates: str | None = None
    days_before: int = 0
    stale_on_arrival: bool = False


@dataclass(frozen=True)
class Story:
    id: str
    lang: str
    split: str
    type: str
    batches: tuple[tuple[Item, ...], ...]

    @property
    def items(self) -> list[Item]:
        return [item for batch in self.batches for item in batch]


def load(path: Path = DATA) -> list[Story]:
    stories = []
    for line in path.read_text("utf-8").splitlines():
        raw = json.loads(line)
        batches = tuple(
            tuple(
                Item(
                    text=i["text"],
                    replaces=tuple(i.get("replaces", ())),
                    restates=i.get("restates"),
                    days_before=int(i.get("days_before", 0)),
                    stale_on_arrival=bool(i.get("stale_on_arrival", False)),
                )
                for i in batch
            )
            for batch in raw["batches"]
        )
        stories.append(Story(raw["id"], raw["lang"], raw["split"], raw["type"], batches))
    return stories


@dataclass
class Score:
    stories: int = 0
    candidates: int = 0
    stale_total: int = 0
    stale_visible: int = 0
    paraphrase_total: int = 0
    paraphrase_twice: int = 0
    current_total: int = 0
    current_lost: int = 0
    distinct_total: int = 0
    distinct_lost: int = 0
    #: The other facts held before the story (``held``): each is distinct from all the
    #: story says, so one no longer visible is a distinct fact lost too.
    held_total: int = 0
    held_lost: int = 0
    failed_batches: int = 0
    unshown: int = 0
    unshown_total: int = 0
    cpu_seconds: float = 0.0
    misses: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        for name, value in vars(other).items():
            if name == "misses":
                self.misses += value
            else:
                setattr(self, name, getattr(self, name) + value)

    def row(self) -> dict[str, Any]:
        def pct(a: int, b: int) -> str:
            return f"{a}/{b} ({100 * a / b:.0f} %)" if b else "-"

        per_second = self.candidates / self.cpu_seconds if self.cpu_seconds else 0.0
        return {
            "stale visible": pct(self.stale_visible, self.stale_total),
            "paraphrases twice": pct(self.paraphrase_twice, self.paraphrase_total),
            "current lost": pct(self.current_lost, self.current_total),
            "distinct lost": pct(self.distinct_lost, self.distinct_total),
            "held lost": pct(self.held_lost, self.held_total),
            "unshown": pct(self.unshown, self.unshown_total),
            "failed batches": self.failed_batches,
            "candidates/s (CPU)": f"{per_second:.0f}",
        }


Factory = Callable[[Story], Consolidator]


def held_facts(n: int) -> list[str]:
    """``n`` unrelated facts a user already holds (varied, so none is a paraphrase of another)."""
    things = ["stamps", "coins", "vinyl records", "postcards", "comics", "old maps", "seashells"]
    places = ["a lake", "the coast", "the hills", "an old mill", "a market", "a museum"]
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            out.append(f"I keep {i + 3} {things[i % len(things)]} in box number {i}.")
        elif kind == 1:
            out.append(f"On trip {i} I saw {places[i % len(places)]} near milestone {i * 7}.")
        else:
            out.append(f"Recipe card {i} says to bake for {20 + i % 40} minutes.")
    return out


def score_story(
    story: Story, consolidator: Consolidator, settings: Settings, *, held: int = 0
) -> Score:
    """Merge one story's batches in order and score the memory they leave."""
    score = Score(stories=1)
    user = story.id.replace("_", "-")[:60]
    others = _held_entries(user, held)
    state = NamespaceState(f"user:{user}", 0, None, entries=others)
    cid: dict[str, str] = {}
    now = T0
    for b, batch in enumerate(story.batches):
        now += STEP
        cands: list[Candidate] = []
        for i, item in enumerate(batch):
            arrived = now + timedelta(seconds=i)
            said = arrived - timedelta(days=item.days_before) if item.days_before else None
            c = make_candidate(
                user_id=user, trace_id=f"t-{user}", text=item.text,
                idempotency_key=f"{story.id}-{b}-{i}", now=arrived, occurred_at=said,
            )  # fmt: skip
            cid[item.text] = c.id
            cands.append(c)
        score.candidates += len(cands)
        began = time.process_time()
        try:
            _plan, applied = consolidate_batch(
                consolidator, state, cands, now=now, settings=settings.for_consolidation,
                current_files={},
            )  # fmt: skip
        except BatchFailed as exc:
            score.failed_batches += 1
            score.misses.append(f"{story.id} batch {b + 1}: {exc}"[:200])
            continue
        finally:
            score.cpu_seconds += time.process_time() - began
        state = advance(state, applied)
    _judge(story, state, cid, score, others)
    counts = getattr(consolidator, "counts", None)
    if counts is not None:  # the perfect model's: entries it had to touch but was not shown
        score.unshown += counts.unshown
        score.unshown_total += counts.needed
    return score


#: The ids of the facts held before a story (:func:`held_facts`).
HELD_PREFIX: Final = "held-"


def _held_entries(user: str, n: int) -> tuple[Entry, ...]:
    t = T0 - timedelta(days=30)
    return tuple(
        Entry(id=f"{HELD_PREFIX}{i}", path="/memories/facts.md", text=text, valid_from=t,
              created_at=t, last_confirmed_at=t, candidate_ids=(f"{HELD_PREFIX}{i}",))
        for i, text in enumerate(held_facts(n))
    )  # fmt: skip


def _judge(
    story: Story,
    state: NamespaceState,
    cid: dict[str, str],
    score: Score,
    held: Sequence[Entry] = (),
) -> None:
    active = [e for e in state.entries if e.active]
    own = {e.candidate_ids[0] for e in active if e.candidate_ids}
    held_kept = {e.id for e in active if e.id.startswith(HELD_PREFIX)}
    for e in held:
        score.held_total += 1
        if e.id not in held_kept:
            score.held_lost += 1
            score.misses.append(f"{story.id}: held lost: {e.text}")
    replaced = {old for item in story.items for old in item.replaces}
    pairs = {item.text: item.restates for item in story.items if item.restates}
    for item in story.items:
        visible = cid[item.text] in own
        if item.text in replaced or item.stale_on_arrival:
            score.stale_total += 1
            if visible:
                score.stale_visible += 1
                score.misses.append(f"{story.id}: stale visible: {item.text}")
            continue
        # Restatements of one thing are one group, however they chain ("Cardiff is where I'm
        # based" and "still living in Cardiff" both restate "I live in Cardiff").
        partner = _restating(item.text, pairs) - {item.text}
        if item.restates is not None:
            score.paraphrase_total += 1
            twice = [p for p in partner if cid[p] in own]
            if visible and twice:
                score.paraphrase_twice += 1
                score.misses.append(f"{story.id}: twice: {item.text} | {twice[0]}")
        kept = visible or any(cid[p] in own for p in partner)
        if item.replaces:
            score.current_total += 1
            if not kept:
                score.current_lost += 1
                score.misses.append(f"{story.id}: current lost: {item.text}")
        else:
            score.distinct_total += 1
            if not kept:
                score.distinct_lost += 1
                score.misses.append(f"{story.id}: lost: {item.text}")


def _restating(text: str, pairs: Mapping[str, str | None]) -> set[str]:
    """``text`` and every statement linked to it by restating, either way, however far."""
    group, grown = {text}, True
    while grown:
        linked = {t for t, r in pairs.items() if r in group}
        linked |= {r for t in group if (r := pairs.get(t)) is not None}
        grown = not linked <= group
        group |= linked
    return group


def rules_factory(meaning: Meaning | None) -> Factory:
    consolidator = RulesConsolidator(meaning=meaning)
    return lambda story: consolidator


#: Merged before anything is timed, and not scored: a story outside the corpus. Its merge
#: pays what a worker process pays once, at its first batch (lazy imports, first calls).
WARM_UP: Final = Story(
    id="warm-up",
    lang="en",
    split="none",
    type="distinct",
    batches=(
        (Item("I keep a spare key in box number 7."),),
        (Item("On trip 3 I saw a lighthouse near milestone 21."),),
    ),
)


def evaluate(
    stories: Sequence[Story], factory: Factory, *, held: int = 0
) -> tuple[Score, dict[str, Score]]:
    """Score ``stories``; the CPU per candidate is a running worker's: what a consolidating
    process builds before it takes work (:func:`prepare_merges`, as a lane does at start) and
    the first merge's one-time costs are paid before the timing starts."""
    settings = Settings()
    prepare_merges()
    score_story(WARM_UP, factory(WARM_UP), settings, held=held)
    total, by_lang = Score(), dict[str, Score]()
    for story in stories:
        s = score_story(story, factory(story), settings, held=held)
        total.add(s)
        by_lang.setdefault(story.lang, Score()).add(s)
    return total, by_lang


def default_meaning() -> Meaning:
    from worker.runtime.embeddings import DEFAULT_EMBEDDINGS, build_embeddings

    embeddings = build_embeddings(DEFAULT_EMBEDDINGS)
    assert embeddings is not None
    return Meaning(embeddings)


def _perfect(meaning: Meaning) -> Factory:

    return perfect_factory(meaning)


def _modes() -> dict[str, tuple[Callable[[], Factory], int]]:
    return {
        "rules": (lambda: rules_factory(default_meaning()), 0),
        "rules+150": (lambda: rules_factory(default_meaning()), HELD),
        "rules-nomeaning": (lambda: rules_factory(None), 0),
        "perfect": (lambda: _perfect(default_meaning()), 0),
        "perfect+150": (lambda: _perfect(default_meaning()), HELD),
    }


def report(modes: Sequence[str], splits: Sequence[str], *, misses: bool = False) -> list[str]:
    stories = load()
    lines = []
    known = _modes()
    for mode in modes:
        build, held = known[mode]
        factory = build()
        for split in splits:
            chosen = [s for s in stories if split in ("all", s.split)]
            total, _by_lang = evaluate(chosen, factory, held=held)
            lines.append(f"{mode:16} {split:4} {len(chosen)} stories: {total.row()}")
            if misses:
                lines += [f"    {m}" for m in total.misses]
    return lines


#: A held fact and a statement the merge models score this high lie near the bar (1) where
#: the rules would retire the held fact: few enough to read one by one.
NEAR_BAR: Final = 0.8


def held_pairs(meaning: Meaning, stories: Sequence[Story], held: int = HELD) -> str:
    """How near the merge models come to retiring an unrelated held fact: for each statement
    of ``stories``, the :data:`~worker.consolidation.rules.MEANING_NEIGHBOURS` of ``held``
    facts (:func:`held_facts`) nearest it by vector (:meth:`Meaning.nearest`, as many as the
    rules ask about among all entries), each scored with the statement as the newer
    (:meth:`Meaning.merge_score`); how many pairs reach :data:`NEAR_BAR` and 1, and the
    highest. The ``+150`` modes count the facts this
    loses; this shows how close the development half comes when it loses none."""
    facts = held_facts(held)
    texts = list(dict.fromkeys(item.text for story in stories for item in story.items))
    for start in range(0, len(texts), 200):  # within the embedding call's deadline
        meaning.prepare(texts[start : start + 200])
    meaning.prepare(facts)
    scored = []
    for text in texts:
        for j in meaning.nearest(text, facts, MEANING_NEIGHBOURS):
            score = meaning.merge_score(facts[j], text)
            if score is not None:
                scored.append((score, facts[j], text))
    top = max(scored, default=(0.0, "", ""))
    near_bar = sum(score >= NEAR_BAR for score, _, _ in scored)
    over = sum(score >= 1.0 for score, _, _ in scored)
    return (
        f"held pairs: {len(scored)} scored, {near_bar} at {NEAR_BAR} or more, {over} at 1 or "
        f"more; highest {top[0]:.2f}: {top[1]!r} / {top[2]!r}"
    )


def labelled_pairs(stories: Sequence[Story]) -> list[tuple[str, str, bool]]:
    """Every pair of one story's statements, older first, and whether the newer takes the
    older's place: it replaces it, restates it (or restates what it restates), or it is the
    older statement the story's late arrival was said before. Pairs that involve a replaced or
    late statement otherwise say nothing clear and are left out."""
    out = []
    for story in stories:
        items = story.items
        for x, older in enumerate(items):
            for y in range(x + 1, len(items)):
                newer = items[y]
                merge = (
                    older.text in newer.replaces
                    or newer.restates == older.text
                    or (older.restates is not None and older.restates == newer.restates)
                    or (newer.stale_on_arrival and x == 0)
                )
                unclear = bool(older.replaces or newer.replaces)
                unclear |= older.stale_on_arrival or newer.stale_on_arrival
                if merge or not unclear:
                    out.append((older.text, newer.text, merge))
    return out


def fit(
    meaning: Meaning, stories: Sequence[Story], *, several: bool = False, penalty: float = 1.0
) -> MergeModel:
    """A merge model fitted by regularised logistic regression (:func:`logistic`) on the pairs
    of ``stories`` it answers for (``several``: the multi-valued ones, else the single-valued
    ones; see :meth:`Meaning.merge_score`); its threshold is left at 0.5 (see
    :func:`choose_threshold`)."""
    x, y = _training_rows(meaning, stories, several=several)
    return logistic(x, y, penalty=penalty)


def logistic(
    rows: Sequence[Mapping[str, float]], answers: Sequence[bool], *, penalty: float = 1.0
) -> MergeModel:
    """A :class:`MergeModel` over the readings of ``rows`` (each a pair's features) fitted to
    ``answers`` by ridge-regularised logistic regression (Newton's method), its threshold left
    at 0.5. A reading that never varies among the rows keeps a scale of 1 (it says nothing,
    and a scale of 0 would divide by zero at every pair the model answers for).

    >>> model = logistic([{"cosine": 0.9, "stems": 0.0}, {"cosine": 0.5, "stems": 0.0}],
    ...                  [True, False])
    >>> model.scale, model.probability({"cosine": 0.95, "stems": 0.0}) > 0.5
    ((0.2, 1.0), True)
    """
    names = tuple(rows[0])
    matrix = np.array([[row[n] for n in names] for row in rows])
    target = np.array([float(answer) for answer in answers])
    mean, spread = matrix.mean(axis=0), matrix.std(axis=0)
    scale = np.where(spread.round(6) > 0, spread, 1.0)
    a = np.c_[(matrix - mean) / scale, np.ones(len(matrix))]
    w = np.zeros(a.shape[1])
    ridge = np.diag([*(penalty for _ in names), 0.0])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-a @ w))
        gradient = a.T @ (p - target) + ridge @ w
        hessian = a.T @ (a * (p * (1 - p))[:, None]) + ridge
        w -= np.linalg.solve(hessian, gradient)
    return MergeModel(
        names, tuple(mean.round(6).tolist()), tuple(scale.round(6).tolist()),
        tuple(w[:-1].round(6).tolist()), round(float(w[-1]), 6), 0.5,
    )  # fmt: skip


def _training_rows(
    meaning: Meaning, stories: Sequence[Story], *, several: bool
) -> tuple[list[dict[str, float]], list[bool]]:
    """The features and answers of the labelled pairs the model answers for: not about two
    people (:meth:`Meaning.whose_apart`), on the side of ``several``, and (for several values)
    not another value (:meth:`Meaning.another_of_several`)."""
    pairs = labelled_pairs(stories)
    meaning.prepare([t for a, b, _ in pairs for t in (a, b)])
    x, y = [], []
    for old, new, merge in pairs:
        features = meaning.pair_features(old, new)
        if features is None or meaning.whose_apart(old, new, features):
            continue
        if (features["multi"] > features["single"]) != several:
            continue
        if several and meaning.another_of_several(old, new):
            continue
        x.append(features)
        y.append(merge)
    return x, y


#: How much worse a distinct fact lost is than a stale value or a paraphrase kept twice, in
#: choosing the merge models' thresholds: losing what the user told us is the worst outcome.
LOSS_WEIGHT: Final = 5
#: Two thresholds whose results on the development half differ by at most this much (stale
#: values, restatements twice and weighted losses together) are as good as each other: one
#: story in 185 is within chance. Of those, the highest is kept, the one that retires least,
#: since a loss the development half cannot show costs more than a stale value it can.
SAME_WITHIN: Final = 1


def choose_threshold(
    meaning: Meaning, stories: Sequence[Story], candidates: Sequence[float], *, which: int
) -> tuple[float, list[str]]:
    """The threshold of merge model ``which`` (0: one value, 1: several) among
    ``candidates`` that does best on ``stories`` (fewest stale values and paraphrases twice,
    each distinct or current fact lost counting :data:`LOSS_WEIGHT`; the highest of those
    within :data:`SAME_WITHIN` of the best), set on ``meaning``; and a line per threshold
    tried."""
    tried, lines = [], []
    for threshold in sorted(candidates, reverse=True):
        _set_threshold(meaning, which, threshold)
        score, _ = evaluate(stories, rules_factory(meaning))
        lost = score.distinct_lost + score.current_lost
        worse = score.stale_visible + score.paraphrase_twice + LOSS_WEIGHT * lost
        tried.append((worse, -threshold))
        lines.append(f"model {which}, threshold {threshold:.2f}: {score.row()}")
    least = min(worse for worse, _ in tried)
    best = max(-negated for worse, negated in tried if worse <= least + SAME_WITHIN)
    _set_threshold(meaning, which, best)
    return best, lines


def _set_threshold(meaning: Meaning, which: int, threshold: float) -> None:
    models = list(meaning.merge_models)
    models[which] = replace(models[which], threshold=threshold)
    meaning.merge_models = (models[0], models[1])


def write_model(path: Path | None = None) -> list[str]:
    """Fit both merge models on the development half, choose their thresholds there (the
    one-value model's first, with the other off), and write them where the package ships
    them."""
    stories = [s for s in load() if s.split == "dev"]
    meaning = default_meaning()
    one, several = fit(meaning, stories), fit(meaning, stories, several=True)
    meaning.merge_models = (one, replace(several, threshold=1.0))  # off: never reached
    steps = [0.5 + 0.05 * i for i in range(10)]
    _, lines = choose_threshold(meaning, stories, steps, which=0)
    _, more = choose_threshold(meaning, stories, steps, which=1)
    target = path or Path(merge_module_file())
    about = (
        "Whether a newer statement takes an older one's place: logistic models fitted by "
        "`python -m bench updates --fit` on the development half of "
        "bench/data/update_stories.jsonl (see worker.consolidation.meaning.MergeModel)."
    )
    one, several = meaning.merge_models
    document = {"about": about, "one": asdict(one), "several": asdict(several)}
    target.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return [*lines, *more, f"chosen: {one.threshold:.2f}, {several.threshold:.2f}; written"]


def merge_module_file() -> str:
    from worker.consolidation import meaning as module

    return str(Path(module.__file__).with_name(MERGE_MODEL_FILE))


def run() -> list[str]:
    return report(["rules", "rules-nomeaning", "perfect", "perfect+150"], ["dev", "test"])


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench updates")
    parser.add_argument("--mode", action="append", choices=sorted(_modes()))
    parser.add_argument("--split", action="append", choices=["dev", "test", "all"])
    parser.add_argument("--misses", action="store_true", help="print every miss")
    parser.add_argument(
        "--fit", action="store_true", help="fit the merge model on the development half"
    )
    parser.add_argument(
        "--held-pairs", action="store_true",
        help="how near the merge models come to retiring a held fact, per split",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.fit:
        print("\n".join(write_model()))
        return 0
    if args.held_pairs:
        meaning, stories = default_meaning(), load()
        for split in args.split or ["dev"]:
            chosen = [s for s in stories if split in ("all", s.split)]
            print(f"{split:4} {held_pairs(meaning, chosen)}")
        return 0
    for line in report(args.mode or ["rules"], args.split or ["dev"], misses=args.misses):
        print(line)
    return 0


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
