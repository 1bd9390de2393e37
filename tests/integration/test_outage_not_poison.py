"""Failures of a dependency retry without counting toward dead-lettering; failures of the
batch itself are counted. Real Redis and SQLite."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import redis

from worker.consolidation.plan import Plan
from worker.consolidation.rules import RulesConsolidator
from worker.errors import ConsolidatorError, ModelUnavailable
from worker.models import Candidate, NamespaceState, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore


class Failing(RulesConsolidator):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        raise self.error


def attempt_many(
    redis_client: redis.Redis, settings: Settings, store: MemoryStore, error: Exception
) -> tuple[str, RedisQueue]:
    queue = RedisQueue(redis_client, settings.for_queue)
    user = "u-" + settings.key_prefix
    queue.enqueue(make_candidate(user_id=user, trace_id="t1", text="I prefer tea"))
    pipeline = Pipeline(
        queue=queue, store=store, consolidator=Failing(error), settings=settings.for_consolidation
    )
    later = queue.server_ms() / 1000
    for step in range(settings.max_attempts * 3):
        for claim in queue.claim_due(now=later + settings.max_wait_seconds + 3600 * (step + 1)):
            pipeline.consolidate(claim)
    return f"user:{user}", queue


def test_a_model_provider_outage_never_dead_letters_the_batch(
    redis_client: redis.Redis, settings: Settings, sqlite_store: MemoryStore
) -> None:
    ns, queue = attempt_many(
        redis_client, settings, sqlite_store, ModelUnavailable("provider answered 503")
    )

    state = queue.admin.namespace_state(ns)
    assert (state.dead, state.attempts, state.pending) == (False, 0, 1)
    assert "503" in (state.last_error or "")


def test_a_failing_consolidation_is_dead_lettered_after_max_attempts(
    redis_client: redis.Redis, settings: Settings, sqlite_store: MemoryStore
) -> None:
    ns, queue = attempt_many(
        redis_client, settings, sqlite_store, ConsolidatorError("the plan made no sense")
    )

    state = queue.admin.namespace_state(ns)
    assert (state.dead, state.attempts) == (True, settings.max_attempts)
