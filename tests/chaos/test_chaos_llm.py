"""Experiment: the LLM consolidation path misbehaving, end to end through the real pipeline.

The model raises, times out, or answers with schema-valid but destructive plans (invalidate
everything, refer to another namespace's entries, write outside ``/memories/``), or with an
answer cut off (mid-string while marked finished, without its closing brackets, or ended by
the length limit). Every such batch is rejected without writing anything, keeps its
candidates, is dead-lettered after ``max_attempts`` with the reason, and commits normally once
the model is fixed and the batch retried from the dead-letter set.
"""

from __future__ import annotations

import html
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Final

import pytest
import redis
from langchain_core.messages import AIMessage, BaseMessage

from tests.chaos_support.harness import audit_store
from tests.support.scripted_model import JsonTextModel, plan_reply
from worker.consolidation.llm import LLMConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore

FACTS: Final = "/memories/facts.md"
MAX_ATTEMPTS: Final = 3
#: Each claim happens this much later than the previous one: past any retry backoff.
STEP: Final = 10_000.0

Responder = Callable[[list[BaseMessage]], AIMessage]


def shown(messages: list[BaseMessage], tag: str) -> list[tuple[str, str]]:
    """(short id, unescaped text) of every ``<tag>`` element in the data message."""
    data = str(messages[1].content)
    return [(i, html.unescape(t)) for i, t in re.findall(rf'<{tag} id="(\w+)"[^>]*>(.*?)</{tag}>',
                                                         data)]  # fmt: skip


def cooperative(messages: list[BaseMessage]) -> AIMessage:
    """Adds every candidate shown, as a well-behaved model would."""
    ops = [{"op": "add", "candidates": [c], "path": FACTS, "text": t}
           for c, t in shown(messages, "candidate")]  # fmt: skip
    return plan_reply(ops)


def raising(error: BaseException) -> Responder:
    def respond(_messages: list[BaseMessage]) -> AIMessage:
        raise error

    return respond


def invalidate_everything(messages: list[BaseMessage]) -> AIMessage:
    ops = [{"op": "invalidate", "entry": e, "candidates": [], "reason": "clean slate"}
           for e, _ in shown(messages, "entry")]  # fmt: skip
    return plan_reply(ops + [{"op": "reject", "candidates": [c], "reason": "noise"}
                             for c, _ in shown(messages, "candidate")])  # fmt: skip


def foreign_ids(foreign_entry: str) -> Responder:
    def respond(messages: list[BaseMessage]) -> AIMessage:
        cands = [c for c, _ in shown(messages, "candidate")]
        return plan_reply([
            {"op": "invalidate", "entry": foreign_entry, "candidates": [], "reason": "mine now"},
            {"op": "supersede", "entry": "E99", "candidates": cands[:1], "text": "hijacked"},
            {"op": "add", "candidates": ["C77", *cands[1:]], "path": FACTS, "text": "x"},
        ])  # fmt: skip

    return respond


def escaping_paths(messages: list[BaseMessage]) -> AIMessage:
    paths = ["/memories/../../etc/passwd", "/etc/cron.d/memworker", "/memories/a/../../b.md"]
    ops = [{"op": "add", "candidates": [c], "path": paths[n % len(paths)], "text": t}
           for n, (c, t) in enumerate(shown(messages, "candidate"))]  # fmt: skip
    return plan_reply(ops)


@pytest.fixture
def cfg(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"max_attempts": MAX_ATTEMPTS, "max_removals_per_run": 2, "sinks": []}
    )


@pytest.fixture
def store(cfg: Settings) -> Iterator[MemoryStore]:
    store = MemoryStore.from_url(str(cfg.database_url), create=True)
    yield store
    store.dispose()


class World:
    """A queue, a store and a clock that only moves forward, for one test."""

    def __init__(self, cfg: Settings, store: MemoryStore, client: redis.Redis) -> None:
        self.cfg = cfg
        self.store = store
        self.queue = RedisQueue(client, cfg.for_queue)
        self.now = time.time()

    def pipeline(self, respond: Responder) -> Pipeline:
        # A model answering the JSON-text methods as providers' integrations parse them.
        agent = LLMConsolidator.from_settings(
            self.cfg.for_consolidation, model=JsonTextModel(responder=respond)
        )
        return Pipeline(
            queue=self.queue,
            store=self.store,
            consolidator=agent,
            settings=self.cfg.for_consolidation,
        )

    def enqueue(self, user: str, *texts: str) -> set[str]:
        batch = [make_candidate(user_id=user, trace_id="t", text=t) for t in texts]
        for candidate in batch:
            self.queue.enqueue(candidate)
        return {c.id for c in batch}

    def run(self, respond: Responder) -> str:
        self.now += STEP
        (claim,) = self.queue.claim_due(now=self.now)
        return self.pipeline(respond).consolidate(claim).outcome


#: The provider failing: an outage, not the batch's fault (never dead-lettered).
PROVIDER_FAILURES: Final[dict[str, Responder]] = {
    "raises": raising(RuntimeError("provider answered 500")),
    "times out": raising(TimeoutError("the request timed out after 30 s")),
}

#: The model answering, badly: the batch's fault (counted, then dead-lettered).
MISBEHAVIOURS: Final[dict[str, Callable[[str], Responder]]] = {
    "invalidates everything": lambda _foreign: invalidate_everything,
    "uses another namespace's ids": foreign_ids,
    "writes outside /memories/": lambda _foreign: escaping_paths,
}


@pytest.mark.parametrize("misbehaviour", list(MISBEHAVIOURS))
def test_a_misbehaving_model_is_rejected_dead_lettered_and_retried_after_the_fix(
    misbehaviour: str, cfg: Settings, store: MemoryStore, redis_client: redis.Redis
) -> None:
    world = World(cfg, store, redis_client)
    victim, other = "v" + uuid.uuid4().hex[:8], "o" + uuid.uuid4().hex[:8]
    world.enqueue(other, "My cat is called Miso")
    assert world.run(cooperative) == "committed"
    world.enqueue(victim, "I live in Lyon", "I have two bikes", "I play the cello", "I like figs")
    assert world.run(cooperative) == "committed"
    before = audit_store(str(cfg.database_url))
    foreign_entry = store.load_state(f"user:{other}").entries[0].id
    new = world.enqueue(victim, "I started learning Welsh", "My sister lives in Oslo")
    respond = MISBEHAVIOURS[misbehaviour](foreign_entry)

    outcomes = [world.run(respond) for _ in range(MAX_ATTEMPTS)]

    assert outcomes == ["failed"] * (MAX_ATTEMPTS - 1) + ["dead"]
    assert audit_store(str(cfg.database_url)) == before
    assert {c.id for _, c in world.queue.admin.pending(f"user:{victim}")} == new
    (dead,) = world.queue.admin.dead_letters()
    assert (dead.namespace, dead.attempts, dead.pending) == (f"user:{victim}", MAX_ATTEMPTS, 2)

    assert world.queue.admin.retry_dead(f"user:{victim}", now=world.now)
    assert world.run(cooperative) == "committed"
    after = audit_store(str(cfg.database_url))
    assert sorted(after.ledger[f"user:{victim}"]) == sorted(
        before.ledger[f"user:{victim}"] + list(new)
    )
    assert after.ledger[f"user:{other}"] == before.ledger[f"user:{other}"]
    assert after.active_texts[f"user:{other}"] == ["My cat is called Miso"]
    assert world.queue.admin.pending(f"user:{victim}") == []


@pytest.mark.parametrize("failure", list(PROVIDER_FAILURES))
def test_a_failing_model_provider_changes_nothing_and_is_retried_until_it_answers(
    failure: str, cfg: Settings, store: MemoryStore, redis_client: redis.Redis
) -> None:
    world = World(cfg, store, redis_client)
    victim = "v" + uuid.uuid4().hex[:8]
    world.enqueue(victim, "I live in Lyon")
    assert world.run(cooperative) == "committed"
    before = audit_store(str(cfg.database_url))
    new = world.enqueue(victim, "I started learning Welsh", "My sister lives in Oslo")

    outcomes = [world.run(PROVIDER_FAILURES[failure]) for _ in range(MAX_ATTEMPTS * 3)]

    assert outcomes == ["failed"] * (MAX_ATTEMPTS * 3)
    assert audit_store(str(cfg.database_url)) == before
    assert world.queue.admin.dead_letters() == []
    assert world.queue.admin.namespace_state(f"user:{victim}").attempts == 0
    assert world.run(cooperative) == "committed"  # the provider is back: no operator needed
    after = audit_store(str(cfg.database_url))
    assert sorted(after.ledger[f"user:{victim}"]) == sorted(
        before.ledger[f"user:{victim}"] + list(new)
    )


def json_plan(messages: list[BaseMessage]) -> str:
    """The whole JSON answer a cooperative model writes in ``json_mode``: every candidate
    added, the last one with a key."""
    ops: list[dict[str, object]] = [
        {"op": "add", "candidates": [c], "path": FACTS, "text": t}
        for c, t in shown(messages, "candidate")
    ]
    ops[-1]["key"] = "preference.drink"
    return json.dumps({"ops": ops})


def answered(cut: Callable[[str], str], **ended: str) -> Responder:
    """A ``json_mode`` answer: the cooperative plan passed through ``cut``, ended as ``ended``."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(
            cut(json_plan(messages)), response_metadata=ended or {"finish_reason": "stop"}
        )

    return respond


#: Answers cut off, each a valid plan once a lenient parser completes it; and the reason the
#: dead letter must give. The last candidate is "I prefer green tea" (key preference.drink).
CUT_ANSWERS: Final[dict[str, tuple[Responder, str]]] = {
    "cut inside a string, marked stop": (
        answered(lambda plan: plan[: plan.rindex("I prefer") + 5]), "not one complete JSON"),
    "without its closing brackets": (answered(lambda plan: plan[:-2]), "not one complete JSON"),
    "a string field cut": (
        answered(lambda plan: plan[: plan.rindex("preference.drink") + 14]),
        "not one complete JSON"),
    "finish_reason length": (
        answered(lambda plan: plan, finish_reason="length"), "cut off at its length limit"),
    "stop_reason length": (
        answered(lambda plan: plan, stop_reason="length"), "cut off at its length limit"),
}  # fmt: skip


@pytest.mark.parametrize("answer", list(CUT_ANSWERS))
def test_an_answer_cut_off_commits_nothing_and_is_dead_lettered_with_the_reason(
    answer: str, cfg: Settings, store: MemoryStore, redis_client: redis.Redis
) -> None:
    world = World(cfg.model_copy(update={"model_structured_method": "json_mode"}), store,
                  redis_client)  # fmt: skip
    victim = "v" + uuid.uuid4().hex[:8]
    before = audit_store(str(cfg.database_url))
    new = world.enqueue(victim, "I play the cello", "I prefer green tea")
    respond, reason = CUT_ANSWERS[answer]

    outcomes = [world.run(respond) for _ in range(MAX_ATTEMPTS)]

    assert outcomes == ["failed"] * (MAX_ATTEMPTS - 1) + ["dead"]
    assert audit_store(str(cfg.database_url)) == before
    (dead,) = world.queue.admin.dead_letters()
    assert (dead.namespace, dead.pending) == (f"user:{victim}", 2)
    assert reason in (dead.last_error or "")

    assert world.queue.admin.retry_dead(f"user:{victim}", now=world.now)
    assert world.run(answered(lambda plan: plan)) == "committed"
    assert set(audit_store(str(cfg.database_url)).ledger[f"user:{victim}"]) == new
    assert world.queue.admin.pending(f"user:{victim}") == []
    assert {e.text for e in store.load_state(f"user:{victim}").entries} == {
        "I play the cello", "I prefer green tea"}  # fmt: skip
