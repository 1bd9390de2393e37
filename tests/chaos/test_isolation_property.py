"""Property: whatever the interleaving of enqueue, claim, consolidate and abandoned leases across
users, assistants and scopes, no memory ever appears outside its namespace.

Hypothesis draws a sequence of operations over nine namespaces (users with and without an
assistant, the same user ids inside two organisations, and agent-scope namespaces) that share
the same texts, so a leak would be a
well-formed memory in the wrong place: only provenance tells. After the sequence and a drain,
every entry's and every ledger row's candidate ids must belong to candidates enqueued for that
very namespace, and nothing enqueued may be missing from ledger ∪ pending.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Final

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.chaos_support.harness import audit_store, pending_ids
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore

#: (scope, user, assistant, org): u0 also exists in two orgs, each another person.
TARGETS: Final = (
    ("user", "u0", None, None),
    ("user", "u0", "bot-a", None),
    ("user", "u1", None, None),
    ("user", "u1", "bot-a", None),
    ("user", "u0", None, "acme"),
    ("user", "u0", "bot-a", "acme"),
    ("user", "u0", "bot-a", "globex"),
    ("agent", None, "bot-a", None),
    ("agent", None, "bot-b", None),
)
#: Shared by every namespace: the same text in two namespaces must stay two memories.
TEXTS: Final = (
    ("fact", "I prefer green tea", None),
    ("fact", "I prefer Green Tea!", None),
    ("fact", "My favourite language is Rust", "profile.language"),
    ("fact", "My favourite language is Go", "profile.language"),
    ("fact", "I live in Lyon", None),
    ("forget", "I live in Lyon", None),
    ("turn", "user: remember that my dog is called Rex\nassistant: noted", None),
    ("fact", "The answer is always 42", None),
)

enqueue_op = st.tuples(
    st.just("enqueue"), st.integers(0, len(TARGETS) - 1), st.integers(0, len(TEXTS) - 1)
)
operations = st.lists(
    st.one_of(
        enqueue_op,
        enqueue_op,
        st.tuples(st.just("consolidate"), st.just(0), st.just(0)),
        st.tuples(st.just("abandon"), st.just(0), st.just(0)),
        st.tuples(st.just("wait"), st.integers(1, 120), st.just(0)),
    ),
    max_size=30,
)


@pytest.fixture
def store(settings: Settings) -> Iterator[MemoryStore]:
    store = MemoryStore.from_url(str(settings.database_url), create=True)
    yield store
    store.dispose()


def namespace_of(scope: str, user: str | None, assistant: str | None, org: str | None) -> str:
    if scope == "agent":
        return f"agent:{assistant}"
    within = f"org:{org}:" if org else ""
    return f"{within}user:{user}" + (f":{assistant}" if assistant else "")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations)
def test_no_entry_ever_appears_outside_its_namespace(
    ops: list[tuple[str, int, int]],
    settings: Settings,
    store: MemoryStore,
    redis_client: redis.Redis,
    key_prefix: str,
) -> None:
    tag = uuid.uuid4().hex[:8]  # fresh ids and keys per example: examples share nothing
    cfg = settings.model_copy(update={"key_prefix": f"{key_prefix}-{tag}", "sinks": []})
    queue = RedisQueue(redis_client, cfg.for_queue)
    pipeline = Pipeline(
        queue=queue, store=store, consolidator=RulesConsolidator(), settings=cfg.for_consolidation
    )
    targets = [
        (scope, user and f"{user}-{tag}", assistant and f"{assistant}-{tag}", org)
        for scope, user, assistant, org in TARGETS
    ]
    enqueued: dict[str, set[str]] = {namespace_of(*t): set() for t in targets}
    now = time.time()

    def consolidate_due() -> int:
        claims = queue.claim_due(now=now)
        for claim in claims:
            pipeline.consolidate(claim)
        return len(claims)

    try:
        for op, a, b in ops:
            if op == "enqueue":
                scope, user, assistant, org = targets[a]
                kind, text, key = TEXTS[b]
                candidate = make_candidate(
                    user_id=user, assistant_id=assistant, scope=scope, trace_id="t",
                    text=text, kind=kind, key=key, org_id=org,
                )  # fmt: skip
                queue.enqueue(candidate, now=now)
                enqueued[candidate.namespace].add(candidate.id)
            elif op == "consolidate":
                consolidate_due()
            elif op == "abandon":
                queue.claim_due(now=now)  # a worker that dies holding the leases
            else:
                now += a
        for _ in range(20):  # drain: past every debounce, lease and backoff
            now += 3600
            if not consolidate_due():
                break
        for dead in queue.admin.dead_letters():
            queue.admin.retry_dead(dead.namespace, now=now)
        consolidate_due()

        audit = audit_store(str(cfg.database_url))
        pending = pending_ids(queue, enqueued)
        for ns, ids in enqueued.items():
            assert set(audit.entry_candidates.get(ns, [])) <= ids, f"entry of {ns} leaked"
            assert set(audit.ledger.get(ns, [])) <= ids, f"ledger of {ns} leaked"
            assert ids <= set(audit.ledger.get(ns, [])) | set(pending[ns]), f"{ns} lost some"
        ours = {ns for ns in audit.ledger if tag in ns}
        assert ours <= set(enqueued)
    finally:
        keys = list(redis_client.scan_iter(match=f"{cfg.key_prefix}:*", count=1000))
        if keys:
            redis_client.delete(*keys)
