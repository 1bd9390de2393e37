"""LLM economy: calls and prompt tokens per candidate, memworker vs langmem and mem0, offline.

All three systems run the same stream (200 candidates, 20 users, each user's ten; memworker
gets them as two debounced batches of five, the peers one ``add``/``invoke`` each, as after
every turn) against the same recording scripted model (:mod:`bench.peers_model`): prompt
tokens are ``count_tokens_approximately`` of the messages and of the bound tool schemas, the
scripted replies add every fact not already shown. Then:

- **duplicates**: 8 threads add the same fact for one user at once. memworker: 8 hot-path
  ``enqueue`` calls (real Redis), then the batch through the rules consolidator and through
  the LLM one; the peers: 8 concurrent ``add``/``invoke``. Counted: stored entries holding it.
- **growth**: a user already holding 10, 100 and 500 entries gets a batch of 5 new
  candidates: prompt tokens per candidate. Goal: memworker's 500/10 ratio <= 1.5x (the
  prompt shows a large memory only the entries a batch can touch).

The peers (extra ``peers``) are skipped, with the install command, when absent. Run:
``python -m bench llm_economy``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from bench import peers
from bench._support import delete_prefix, redis_url, sentences, unique_prefix, verdict
from bench.peers_model import RecordingModel, memworker_reply
from worker.consolidation import llm as _llm
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.plan import Consolidator, Plan, advance, consolidate_batch
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, Entry, NamespaceState, make_candidate
from worker.settings import Settings

USERS: Final = 20
PER_USER: Final = 10
BATCH: Final = 5
#: Concurrent adds of one fact in the duplicates test (8 request threads of a chat service).
THREADS: Final = 8
DUPLICATE: Final = "I am allergic to peanuts"
#: The same fact added one after the other: a peer's duplicates come from the race, not this.
IN_TURN: Final = 3
#: Entries a user already holds in the growth series, and the goal on the last/first ratio.
SIZES: Final = (10, 100, 500)
GROWTH_GOAL: Final = 1.5
#: memworker's prompt tokens per candidate against each peer's, measured in the same run.
TOKENS_GOAL: Final = 0.2
T0: Final = datetime(2025, 1, 1, tzinfo=UTC)
SETTINGS: Final = Settings()

_FACTS: Final = (
    "I live in {city}",
    "I work as a {job}",
    "I prefer {drink} in the morning",
    "My daughter is called {name}",
    "I am learning {lang}",
    "I have a {pet} named {name}",
    "I prefer short answers with code samples",
    "My favourite band is {band}",
    "I run {n} kilometres every weekend",
    "I am allergic to {food}",
)
_FILL: Final = {
    "city": ("Lisbon", "Oslo", "Osaka", "Lima", "Tunis"),
    "job": ("nurse", "welder", "teacher"),
    "drink": ("green tea", "espresso", "water"),
    "name": ("Ada", "Rex", "Mila", "Tom"),
    "lang": ("Rust", "Korean", "Italian"),
    "pet": ("dog", "cat", "parrot"),
    "band": ("Queen", "Air", "Muse"),
    "n": ("5", "10", "21"),
    "food": ("nuts", "shellfish"),
}


def stream(users: int = USERS, per_user: int = PER_USER) -> list[Candidate]:
    """The deterministic candidate stream: ``users`` x ``per_user`` facts."""
    out = []
    for u in range(users):
        for i in range(per_user):
            values = {k: v[(u + i) % len(v)] for k, v in _FILL.items()}
            text = _FACTS[(u * 3 + i) % len(_FACTS)].format(**values)
            out.append(make_candidate(
                user_id=f"user-{u}", trace_id=f"t{u}-{i}", text=text,
                idempotency_key=f"{u}-{i}", now=T0 + timedelta(minutes=i),
            ))  # fmt: skip
    return out


def agent(model: RecordingModel) -> LLMConsolidator:
    return LLMConsolidator(model, token_budget=12_000, max_text_bytes=8192, max_removals=20)


def ours(candidates: Sequence[Candidate], model: RecordingModel) -> tuple[int, int, int]:
    """(prompt tokens, calls, batches) of memworker's LLM consolidator over ``candidates``."""
    consolidator = agent(model)
    tokens = calls = batches = 0
    by_user: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_user.setdefault(c.namespace, []).append(c)
    for namespace, items in by_user.items():
        st = NamespaceState(namespace, 0, None)
        for start in range(0, len(items), BATCH):
            plan, st = _merge(consolidator, st, items[start : start + BATCH])
            tokens, calls, batches = (
                tokens + plan.prompt_tokens,
                calls + plan.llm_calls,
                batches + 1,
            )
    return tokens, calls, batches


def _merge(
    consolidator: Consolidator, st: NamespaceState, batch: Sequence[Candidate]
) -> tuple[Plan, NamespaceState]:
    plan, applied = consolidate_batch(consolidator, st, batch, now=T0 + timedelta(hours=1),
                                      settings=SETTINGS, current_files={})  # fmt: skip
    return plan, advance(st, applied)


def ours_duplicates() -> dict[str, int] | str:
    """Entries holding :data:`DUPLICATE` after 8 concurrent enqueues, per consolidator path."""
    import redis

    from worker.queue.client import MemoryClient
    from worker.queue.redis_queue import RedisQueue

    prefix = unique_prefix("econ")
    settings = Settings(redis_url=redis_url(), key_prefix=prefix)
    client = redis.Redis.from_url(redis_url())
    try:
        client.ping()
    except redis.RedisError as exc:
        return f"skipped (Redis at {redis_url()} unreachable: {exc})"
    try:
        with MemoryClient(settings) as hot:
            errors = _at_once(
                lambda i: hot.enqueue(user_id="dup", trace_id=f"t{i}", text=DUPLICATE)
            )
        if errors:
            raise errors[0]
        batch = [c for _, c in RedisQueue(client, settings.for_queue).pending("user:dup")]
        out = {}
        paths: list[tuple[str, Consolidator]] = [
            ("rules", RulesConsolidator()),
            ("llm", agent(RecordingModel(responder=memworker_reply))),
        ]
        for name, consolidator in paths:
            _plan, st = _merge(consolidator, NamespaceState("user:dup", 0, None), batch)
            out[name] = sum(e.active and e.text == DUPLICATE for e in st.entries)
        return out
    finally:
        delete_prefix(client, prefix)
        client.close()


def _at_once(work: Callable[[int], object]) -> list[BaseException]:
    """Run ``work(0)`` … ``work(THREADS - 1)`` in threads released together by a barrier;
    the exceptions they raised."""
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _held(namespace: str, texts: Sequence[str]) -> NamespaceState:
    entries = tuple(
        Entry(id=f"g{i}", path="/memories/facts.md", text=text, valid_from=T0, created_at=T0,
              last_confirmed_at=T0 + timedelta(seconds=i))
        for i, text in enumerate(texts)
    )  # fmt: skip
    return NamespaceState(namespace, 1, None, entries=entries)


def growth_texts(size: int) -> tuple[list[str], list[str]]:
    """``size`` held texts and :data:`BATCH` new ones, distinct, deterministic."""
    texts = sentences(17, size + BATCH)
    return texts[:size], texts[size:]


def ours_growth(*, every_entry: bool = False) -> dict[int, float]:
    """memworker's prompt tokens per candidate for a batch of 5 over ``SIZES`` held entries.

    ``every_entry``: the baseline, the prompt as it was before it showed a large memory only
    the entries a batch can touch (every active entry shown).
    """
    shown = _llm.touched_entries
    if every_entry:
        _llm.touched_entries = _every_entry
    try:
        return _growth()
    finally:
        _llm.touched_entries = shown


def _every_entry(state: NamespaceState, candidates: Sequence[Candidate]) -> list[Entry]:
    return [e for e in state.entries if e.active]


def _growth() -> dict[int, float]:
    out = {}
    for size in SIZES:
        held, new = growth_texts(size)
        batch = [make_candidate(user_id=f"g{size}", trace_id=f"n{i}", text=t,
                                idempotency_key=t, now=T0 + timedelta(seconds=i))
                 for i, t in enumerate(new)]  # fmt: skip
        model = RecordingModel(responder=memworker_reply)
        _merge(agent(model), _held(f"user:g{size}", held), batch)
        out[size] = sum(model.tokens) / len(batch)
    return out


def peer_figures(name: str, candidates: Sequence[Candidate]) -> tuple[str, float]:
    """One peer's line (stream, duplicates, growth) and its prompt tokens per candidate."""
    peer = peers.start(name)
    try:
        for c in candidates:
            peer.add(c.namespace, c.text)
        n, tokens, calls = len(candidates), sum(peer.model.tokens), len(peer.model.tokens)
        errors = _at_once(lambda _i: peer.add("dup", DUPLICATE))
        dups = peer.stored("dup").count(DUPLICATE)
        failed = (
            f", {len(errors)} of the adds raised {type(errors[0]).__name__}: {str(errors[0])[:80]}"
            if errors else ""
        )  # fmt: skip
        for _ in range(IN_TURN):
            peer.add("turns", DUPLICATE)
        in_turn = peer.stored("turns").count(DUPLICATE)
        growth = {}
        for size in SIZES:
            held, new = growth_texts(size)
            peer.preload(f"g{size}", held)
            before = len(peer.model.tokens)
            for text in new:
                peer.add(f"g{size}", text)
            growth[size] = sum(peer.model.tokens[before:]) / len(new)
    finally:
        peer.close()
    label = f"{name} {peers.version(name)}"
    line = (f"  {label:<16}: {calls / n:5.2f} calls/cand, {tokens / n:8.1f} prompt tokens/cand, "
            f"duplicates {dups}/{THREADS} ({in_turn}/{IN_TURN} added in turn{failed}), "
            f"growth {_series(growth)}")  # fmt: skip
    return line, tokens / n


def _series(growth: dict[int, float]) -> str:
    return " ".join(f"{size}:{growth[size]:.0f}" for size in SIZES)


def run() -> list[str]:
    candidates = stream()
    n = len(candidates)
    model = RecordingModel(responder=memworker_reply)
    tokens, calls, batches = ours(candidates, model)
    dups = ours_duplicates()
    growth = ours_growth()
    before = ours_growth(every_entry=True)
    dup_text = (
        dups if isinstance(dups, str)
        else f"rules {dups['rules']}/{THREADS}, llm {dups['llm']}/{THREADS}"
    )  # fmt: skip
    lines = [
        f"llm economy: {n} candidates, {USERS} users (memworker: batches of {BATCH}); "
        "scripted model, prompt tokens ~ count_tokens_approximately (messages + tool schemas)",
        f"  memworker       : {calls / n:5.2f} calls/cand, {tokens / n:8.1f} prompt tokens/cand, "
        f"duplicates {dup_text}, growth {_series(growth)} (tokens/cand at held entries)",
    ]
    missing = peers.missing()
    if missing:
        lines.append(f"  peers skipped ({', '.join(missing)} not installed): {peers.INSTALL_HINT}")
    else:
        ratios = []
        for name in ("langmem", "mem0"):
            line, per_candidate = peer_figures(name, candidates)
            lines.append(line)
            ratios.append((name, tokens / n / per_candidate))
        worst = max(r for _, r in ratios)
        lines.append(
            "  prompt tokens/cand, memworker/peer: "
            + ", ".join(f"{name} {r:.3f}x" for name, r in ratios)
            + f" (goal <= {TOKENS_GOAL}x: {verdict(worst <= TOKENS_GOAL)})"
        )
    ratio = growth[SIZES[-1]] / growth[SIZES[0]]
    lines += [
        f"  memworker growth {SIZES[-1]}/{SIZES[0]} entries: {ratio:.2f}x "
        f"(goal <= {GROWTH_GOAL}x: {verdict(ratio <= GROWTH_GOAL)}); every entry shown: "
        f"{_series(before)}, {before[SIZES[-1]] / before[SIZES[0]]:.1f}x",
        f"  memworker calls {calls} = batches {batches}",
    ]
    return lines


if __name__ == "__main__":
    print(*run(), sep="\n")
