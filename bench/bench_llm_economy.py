"""Prompt tokens per candidate: our one-call-per-batch agent vs a per-fact pipeline.

Both sides run the same stream (200 candidates, 20 users, each user's ten arriving as two
debounced batches of five) through the same token-counting scripted model, which reports
``count_tokens_approximately`` of every prompt as its usage. The baseline follows the mem0
style: per candidate one extraction call, then per extracted fact one update call shown the
user's related entries (up to ten). For fairness the baseline's two calls reuse *our*
instruction text, which is shorter than mem0's own prompts, so the ratio is conservative.

Run: ``python -m bench`` (all benchmarks) or
``python -c "from bench.bench_llm_economy import run; print(*run(), sep='\\n')"``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.consolidation.apply import advance
from worker.consolidation.engine import consolidate_batch
from worker.consolidation.llm import LLMConsolidator
from worker.consolidation.prompt import INSTRUCTIONS, escape
from worker.models import Candidate, make_candidate
from worker.settings import Settings
from worker.values import NamespaceState

USERS: Final = 20
PER_USER: Final = 10
BATCH: Final = 5
#: Related entries a per-fact update call is shown (mem0 searches the top few memories).
RELATED: Final = 10
#: The goal: our agent spends at most a fifth of the baseline's prompt tokens per candidate.
GOAL: Final = 1 / 5
T0: Final = datetime(2025, 1, 1, tzinfo=UTC)

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


def stream() -> list[Candidate]:
    """The deterministic candidate stream: ``USERS`` × ``PER_USER`` facts."""
    out = []
    for u in range(USERS):
        for i in range(PER_USER):
            values = {k: v[(u + i) % len(v)] for k, v in _FILL.items()}
            text = _FACTS[(u * 3 + i) % len(_FACTS)].format(**values)
            out.append(make_candidate(
                user_id=f"user-{u}", trace_id=f"t{u}-{i}", text=text,
                idempotency_key=f"{u}-{i}", now=T0 + timedelta(minutes=i),
            ))  # fmt: skip
    return out


def _add_all(messages: list[BaseMessage]) -> AIMessage:
    import html
    import re

    found = re.findall(r'<candidate id="(C\d+)"[^>]*>(.*?)</candidate>', str(messages[1].content))
    return plan_reply([{"op": "add", "candidates": [c], "path": "/memories/facts.md",
                        "text": html.unescape(t)} for c, t in found])  # fmt: skip


def ours(candidates: list[Candidate]) -> tuple[int, int]:
    """(prompt tokens, calls) of the LLM agent over the stream."""
    settings = Settings()
    agent = LLMConsolidator(ScriptedChatModel(responder=_add_all), token_budget=12_000,
                            max_text_bytes=8192, max_removals=20)  # fmt: skip
    tokens = calls = 0
    by_user: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_user.setdefault(c.namespace, []).append(c)
    for namespace, items in by_user.items():
        st = NamespaceState(namespace, 0, None)
        for start in range(0, len(items), BATCH):
            plan, applied = consolidate_batch(agent, st, items[start : start + BATCH],
                                              now=T0 + timedelta(hours=1), settings=settings,
                                              current_files={})  # fmt: skip
            st = advance(st, applied)
            tokens, calls = tokens + plan.prompt_tokens, calls + plan.llm_calls
    return tokens, calls


def per_fact(candidates: list[Candidate]) -> tuple[int, int]:
    """(prompt tokens, calls) of the mem0-style pipeline: extract, then update per fact."""
    model = ScriptedChatModel(responder=lambda _m: AIMessage('{"event": "ADD"}'))
    memories: dict[str, list[str]] = {}
    tokens = calls = 0
    for c in candidates:
        extraction = [SystemMessage(INSTRUCTIONS), HumanMessage(f"Input: {escape(c.text)}")]
        related = memories.setdefault(c.namespace, [])[-RELATED:]
        old = "\n".join(f'{{"id": "{i}", "text": "{escape(t)}"}}' for i, t in enumerate(related))
        facts = f'["{escape(c.text)}"]'
        update = [
            SystemMessage(INSTRUCTIONS),
            HumanMessage(f"Old memory:\n{old}\nNew facts: {facts}"),
        ]
        for messages in (extraction, update):
            reply = model.invoke(messages)
            assert reply.usage_metadata is not None
            tokens, calls = tokens + reply.usage_metadata["input_tokens"], calls + 1
        memories[c.namespace].append(c.text)
    return tokens, calls


def run() -> list[str]:
    candidates = stream()
    ours_tokens, ours_calls = ours(candidates)
    base_tokens, base_calls = per_fact(candidates)
    n = len(candidates)
    ratio = ours_tokens / base_tokens
    verdict = "met" if ratio <= GOAL else "MISSED"
    return [
        f"llm economy: {n} candidates, {USERS} users, batches of {BATCH}",
        f"  one call per batch : {ours_tokens / n:8.1f} prompt tokens/cand, {ours_calls} calls",
        f"  per-fact (mem0)    : {base_tokens / n:8.1f} prompt tokens/cand, {base_calls} calls",
        f"  ratio ours/per-fact: {ratio:.3f} (goal <= {GOAL:.2f}: {verdict})",
    ]


if __name__ == "__main__":
    print(*run(), sep="\n")
