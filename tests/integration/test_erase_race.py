"""``forget`` racing a worker: erased data never comes back, and later memories are kept.

A real :class:`Pipeline` merges in a thread with a consolidator that blocks until the test
releases it, while the real ``memworker forget`` runs (real Redis, SQLite and PostgreSQL, the
files sink, and in the ``langgraph`` tests also the LangGraph store sink on a real
``langgraph dev`` server). Afterwards the erased text is nowhere (SQL, files, LangGraph store,
Redis), and a candidate enqueued after the erase is merged exactly once.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, Final

import pytest
import redis
import sqlalchemy as sa
from langgraph_sdk.client import SyncLangGraphClient

from tests.integration.test_cli_support import Ops, make_ops, ops, redis_keys
from tests.langgraph_fixtures import langgraph_client, langgraph_url
from worker.connectors.langgraph import store_namespace
from worker.consolidation.plan import Plan
from worker.consolidation.rules import RulesConsolidator
from worker.models import Candidate, Namespace, NamespaceState
from worker.queue.redis_queue import Claim
from worker.service.consolidate import BatchResult, Pipeline
from worker.service.publish import CLAIM_LEASE, deliver_due, publish_now
from worker.service.publish import _deliver as deliver_one
from worker.service.transfer import erase, erase_target
from worker.store.outbox import LATE_WRITE
from worker.store.schema import candidate_ledger, metadata
from worker.types import Outcome

__all__ = ["langgraph_client", "langgraph_url", "ops"]

#: The erased fact; its cat's name is unique to this test run, since the PostgreSQL database
#: is shared by every test of the session and "nowhere" is checked across all of it.
CAT: Final = "Miso" + uuid.uuid4().hex[:8]
SECRET: Final = f"Remember that my cat is called {CAT}"
TEA: Final = "tea" + uuid.uuid4().hex[:8]
#: Longest a test waits for the merge thread to reach or leave the gate.
GATE_SECONDS: Final = 30.0
#: Store items per search page when looking through the whole LangGraph store.
STORE_PAGE: Final = 100
LATER: Final = "I prefer short answers"


class GatedConsolidator:
    """The rules consolidator, held at the gate until the test opens it (a slow LLM call)."""

    name: ClassVar[str] = "gated"
    needs_model: ClassVar[bool] = False
    handles_turns: ClassVar[bool] = True

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.inner = RulesConsolidator()

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        self.entered.set()
        assert self.opened.wait(GATE_SECONDS), "the test never opened the gate"
        return self.inner.merge(state, batch, now=now)


class InFlight(threading.Thread):
    """One worker's merge of ``claim``, stopped at the gate."""

    def __init__(self, ops: Ops, claim: Claim) -> None:
        super().__init__(daemon=True)
        self.gate = GatedConsolidator()
        runtime = ops.runtime()
        self.pipeline = Pipeline(
            ops.queue,
            ops.store,
            self.gate,
            ops.settings.for_consolidation,
            sinks=tuple(runtime.sinks),
        )
        self.claim = claim
        self.result: BatchResult | None = None

    def run(self) -> None:
        self.result = self.pipeline.consolidate(self.claim)

    def finish(self) -> BatchResult:
        self.gate.opened.set()
        self.join(GATE_SECONDS)
        assert self.result is not None
        return self.result


def _zombie_claim(ops: Ops, namespace: str) -> Claim:
    """A claim whose lease has already expired: its worker still runs, but stalled (a GC pause,
    a hung model call) past its lease, so nothing shows it as busy any more."""
    claim = ops.queue.claim_namespace(namespace, now=time.time() - ops.settings.lease_seconds - 5)
    assert claim is not None
    return claim


def _start(ops: Ops, claim: Claim) -> InFlight:
    merge = InFlight(ops, claim)
    merge.start()
    assert merge.gate.entered.wait(GATE_SECONDS)
    return merge


def _traces(ops: Ops, needle: str) -> list[str]:
    """Where ``needle`` appears: SQL tables, files-sink paths or contents, Redis keys or values."""
    found = []
    with ops.store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            if any(needle in repr(tuple(row)) for row in conn.execute(sa.select(table))):
                found.append(f"sql:{table.name}")
    if ops.files_dir.exists():
        for path in ops.files_dir.rglob("*"):
            if needle in str(path) or (path.is_file() and needle in path.read_text()):
                found.append(f"file:{path}")
    for key in redis_keys(ops.redis, ops.settings.key_prefix):
        kind = ops.redis.type(key).decode()
        dump = repr(ops.redis.xrange(key)) if kind == "stream" else repr(ops.redis.dump(key))
        if needle in key or needle in dump:
            found.append(f"redis:{key}")
    return found


def _merged_once(ops: Ops, candidate_id: str) -> bool:
    with ops.store.engine.connect() as conn:
        n = conn.execute(
            sa.select(sa.func.count()).where(candidate_ledger.c.candidate_id == candidate_id)
        ).scalar_one()
    return int(n) == 1


def test_forget_during_a_stalled_first_merge_leaves_the_erased_text_nowhere(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    merge = _start(ops, _zombie_claim(ops, ns))

    forgot = ops("forget", "--user", ops.user, "--yes")
    result = merge.finish()

    assert forgot.code == 0
    assert result.outcome is Outcome.STALE
    assert _traces(ops, CAT) == []
    assert _traces(ops, ops.user) == []


def test_forget_during_a_stalled_merge_of_a_known_user_leaves_the_erased_text_nowhere(
    ops: Ops,
) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(f"I prefer green {TEA}")
    ops("reconcile", "--user", ops.user)
    ops.enqueue(SECRET)
    merge = _start(ops, _zombie_claim(ops, ns))

    forgot = ops("forget", "--user", ops.user, "--yes")
    result = merge.finish()

    assert forgot.code == 0
    assert result.outcome is Outcome.STALE
    assert _traces(ops, CAT) == []
    assert _traces(ops, TEA) == []
    assert _traces(ops, ops.user) == []


def test_a_candidate_enqueued_after_the_erase_is_merged_once(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    merge = _start(ops, _zombie_claim(ops, ns))
    ops("forget", "--user", ops.user, "--yes")
    merge.finish()

    later = ops.enqueue("I prefer short answers")
    ops("reconcile", "--user", ops.user)
    ops("reconcile", "--user", ops.user)  # a second pass finds nothing new

    assert [e.text for e in ops.store.load_state(ns).entries] == ["I prefer short answers"]
    assert _merged_once(ops, later)
    assert _traces(ops, CAT) == []


def test_forget_checks_for_a_worker_at_the_moment_of_the_erase_not_before(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    target = erase_target(ops.queue.admin, ops.store, ops.user)  # what the prompt showed: not busy
    claim = ops.queue.claim_namespace(ns)  # a worker claims while the operator confirms
    assert claim is not None

    done = erase(ops.queue.admin, ops.store, ops.runtime().sinks, target.keys, now=_utc_now())

    assert done.busy == [ns]
    assert [c.text for _, c in ops.queue.admin.pending(ns)] == [
        SECRET
    ]  # left whole, not half-erased


def test_an_ack_from_before_the_erase_cannot_trim_a_batch_claimed_after_it(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    zombie = _zombie_claim(ops, ns)
    ops("forget", "--user", ops.user, "--yes")
    ops.enqueue("I prefer short answers")
    successor = ops.queue.claim_namespace(ns)
    assert successor is not None

    acked = ops.queue.ack(zombie)

    assert acked is False
    assert successor.token > zombie.token
    assert [c.text for _, c in ops.queue.admin.pending(ns)] == ["I prefer short answers"]


def test_a_redelivered_batch_of_an_erased_user_writes_nothing(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    zombie = _zombie_claim(ops, ns)
    merge = _start(ops, zombie)
    ops("forget", "--user", ops.user, "--yes")
    merge.finish()

    again = InFlight(ops, zombie)  # the broker redelivers the zombie's task
    again.start()
    redelivered = again.finish()

    assert redelivered.outcome in (Outcome.STALE, Outcome.NOTHING_NEW)
    assert _traces(ops, CAT) == []
    assert _traces(ops, ops.user) == []


def _utc_now() -> datetime:
    return datetime.now(UTC)


def test_a_delivery_read_before_the_erase_and_landing_after_it_is_taken_back(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    sinks = ops.runtime().sinks
    claim = ops.queue.claim_namespace(ns)
    assert claim is not None
    Pipeline(
        ops.queue,
        ops.store,
        RulesConsolidator(),
        ops.settings.for_consolidation,
        sinks=tuple(sinks),
    ).consolidate(claim)
    # A deliverer picks it up (the PostgreSQL database is shared by the session: only ours) ...
    (item,) = [
        i
        for i in ops.store.due_outbox(sink="files", now=_utc_now(), limit=10_000)
        if i.namespace == ns
    ]
    ops("forget", "--user", ops.user, "--yes")  # ... the user is erased meanwhile ...

    assert deliver_one(ops.store, sinks["files"], item) is None  # ... then it lands

    assert _traces(ops, CAT) == []


# --- the same races with the LangGraph store sink on a real server -------------------------


@pytest.fixture
def store_ops(
    database_url: str,
    redis_url: str,
    key_prefix: str,
    tmp_path: Path,
    redis_client: redis.Redis,
    langgraph_url: str,
) -> Iterator[Ops]:
    """:func:`ops` publishing to the files sink and to the LangGraph store of a real server."""
    for base in make_ops(
        database_url=database_url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        data_dir=tmp_path / "data",
        client=redis_client,
        MEMWORKER_SINKS='["files", "langgraph"]',
    ):
        yield dataclasses.replace(
            base,
            env={**base.env, "MEMWORKER_LANGGRAPH_URL": langgraph_url},
            settings=base.settings.model_copy(update={"langgraph_url": langgraph_url}),
        )


def _store_items(client: SyncLangGraphClient) -> Iterator[dict[str, Any]]:
    """Every item of the server's store, page by page (other tests' items too)."""
    offset = 0
    while True:
        page = client.store.search_items((), limit=STORE_PAGE, offset=offset)["items"]
        yield from (dict(item) for item in page)
        if len(page) < STORE_PAGE:
            return
        offset += STORE_PAGE


def _everywhere(ops: Ops, client: SyncLangGraphClient, needle: str) -> list[str]:
    """:func:`_traces`, plus the LangGraph store items whose namespace, key or value has it."""
    found = _traces(ops, needle)
    for item in _store_items(client):
        where = "/".join(item["namespace"]) + item["key"]
        if needle in where or needle in repr(item["value"]):
            found.append(f"store:{where}")
    return found


def _store_contents(ops: Ops, client: SyncLangGraphClient) -> list[str]:
    """The contents of the user's memory files in the LangGraph store."""
    prefix = store_namespace(Namespace.for_user(ops.user))
    items = client.store.search_items(prefix, limit=STORE_PAGE)["items"]
    return [str(item["value"]["content"]) for item in items]


def _publish(ops: Ops, namespace: str) -> None:
    """Deliver the outbox rows of ``namespace`` now, as a deliverer would."""
    publish_now(ops.store, ops.runtime().sinks, now=_utc_now(), namespaces=[namespace])


@pytest.mark.langgraph
def test_with_the_store_sink_forget_during_a_stalled_merge_leaves_the_text_nowhere(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(f"I prefer green {TEA}")
    ops("reconcile", "--user", ops.user)
    assert _everywhere(ops, langgraph_client, TEA) != []  # published, to the store too
    assert any(TEA in content for content in _store_contents(ops, langgraph_client))
    ops.enqueue(SECRET)
    merge = _start(ops, _zombie_claim(ops, ns))

    forgot = ops("forget", "--user", ops.user, "--yes")
    result = merge.finish()

    assert forgot.code == 0
    assert result.outcome is Outcome.STALE
    assert _everywhere(ops, langgraph_client, CAT) == []
    assert _everywhere(ops, langgraph_client, TEA) == []
    assert _everywhere(ops, langgraph_client, ops.user) == []


@pytest.mark.langgraph
def test_with_the_store_sink_an_ack_from_before_the_erase_trims_nothing_of_the_next_batch(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    zombie = _zombie_claim(ops, ns)
    ops("forget", "--user", ops.user, "--yes")
    later = ops.enqueue(LATER)
    successor = ops.queue.claim_namespace(ns)
    assert successor is not None

    acked = ops.queue.ack(zombie)
    sinks = tuple(ops.runtime().sinks)
    Pipeline(
        ops.queue, ops.store, RulesConsolidator(), ops.settings.for_consolidation, sinks=sinks
    ).consolidate(successor)
    _publish(ops, ns)

    assert acked is False
    assert _merged_once(ops, later)
    assert [c for c in _store_contents(ops, langgraph_client) if LATER in c] != []
    assert _everywhere(ops, langgraph_client, CAT) == []


@pytest.mark.langgraph
def test_with_the_store_sink_a_redelivered_batch_of_an_erased_user_writes_nothing(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    zombie = _zombie_claim(ops, ns)
    merge = _start(ops, zombie)
    ops("forget", "--user", ops.user, "--yes")
    merge.finish()

    again = InFlight(ops, zombie)  # the broker redelivers the zombie's task
    again.start()
    redelivered = again.finish()
    _publish(ops, ns)

    assert redelivered.outcome in (Outcome.STALE, Outcome.NOTHING_NEW)
    assert _everywhere(ops, langgraph_client, CAT) == []
    assert _everywhere(ops, langgraph_client, ops.user) == []


@pytest.mark.langgraph
def test_with_the_store_sink_a_candidate_enqueued_after_the_erase_is_published_once(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    merge = _start(ops, _zombie_claim(ops, ns))
    ops("forget", "--user", ops.user, "--yes")
    merge.finish()

    later = ops.enqueue(LATER)
    ops("reconcile", "--user", ops.user)
    ops("reconcile", "--user", ops.user)  # a second pass finds nothing new

    assert _merged_once(ops, later)
    assert [c.count(LATER) for c in _store_contents(ops, langgraph_client)] == [1]
    assert _everywhere(ops, langgraph_client, CAT) == []


@pytest.mark.langgraph
def test_with_the_store_sink_a_delivery_landing_after_the_erase_is_taken_back(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    sinks = ops.runtime().sinks
    claim = ops.queue.claim_namespace(ns)
    assert claim is not None
    Pipeline(
        ops.queue,
        ops.store,
        RulesConsolidator(),
        ops.settings.for_consolidation,
        sinks=tuple(sinks),
    ).consolidate(claim)
    # A deliverer reads it (only ours: the PostgreSQL database is shared by the session) ...
    (item,) = [
        i
        for i in ops.store.due_outbox(sink="langgraph", now=_utc_now(), limit=10_000)
        if i.namespace == ns
    ]
    ops("forget", "--user", ops.user, "--yes")  # ... the user is erased meanwhile ...

    assert deliver_one(ops.store, sinks["langgraph"], item) is None  # ... then it lands

    assert _everywhere(ops, langgraph_client, CAT) == []


class _SlowStoreWrite:
    """The real LangGraph store sink, whose write reaches the server only when the test lets
    it, after which the deliverer's call gives up (a timeout): the write landed anyway."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name
        self.entered, self.release = threading.Event(), threading.Event()

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)

    def deliver(self, item: Any) -> None:
        self.entered.set()
        assert self.release.wait(60)
        self.inner.deliver(item)
        raise TimeoutError("the store did not answer in time")

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        self.inner.erase(namespace, paths)


def _slow_store_delivery(ops: Ops, namespace: str) -> tuple[_SlowStoreWrite, threading.Thread]:
    """A deliverer in another thread, inside its (slow) store write when this returns."""
    slow = _SlowStoreWrite(ops.runtime().sinks["langgraph"])
    thread = threading.Thread(
        target=deliver_due,
        args=(ops.store, {"langgraph": slow}),
        kwargs={"namespaces": [namespace]},
    )
    thread.start()
    assert slow.entered.wait(60)
    return slow, thread


@pytest.mark.langgraph
def test_with_the_store_sink_a_timed_out_write_landing_after_forget_is_taken_back(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    claim = ops.queue.claim_namespace(ns)
    assert claim is not None
    Pipeline(
        ops.queue,
        ops.store,
        RulesConsolidator(),
        ops.settings.for_consolidation,
        sinks=("langgraph",),
    ).consolidate(claim)
    slow, thread = _slow_store_delivery(ops, ns)
    ops("forget", "--user", ops.user, "--yes")

    slow.release.set()  # the write the deliverer gave up on lands after the erase
    thread.join(60)

    assert _everywhere(ops, langgraph_client, CAT) == []


@pytest.mark.langgraph
def test_with_the_store_sink_a_returning_user_keeps_the_new_memory_and_not_the_late_write(
    store_ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    ops = store_ops
    ns = f"user:{ops.user}"
    ops.enqueue(SECRET)
    claim = ops.queue.claim_namespace(ns)
    assert claim is not None
    Pipeline(
        ops.queue,
        ops.store,
        RulesConsolidator(),
        ops.settings.for_consolidation,
        sinks=("langgraph",),
    ).consolidate(claim)
    slow, thread = _slow_store_delivery(ops, ns)
    ops("forget", "--user", ops.user, "--yes")
    ops.enqueue(LATER)  # the user comes back before the late write lands
    ops("reconcile", "--user", ops.user)

    slow.release.set()
    thread.join(60)
    later = ops.store.db_now() + CLAIM_LEASE + LATE_WRITE + timedelta(minutes=1)
    deliver_due(ops.store, ops.runtime().sinks, now=later, namespaces=[ns])

    assert _everywhere(ops, langgraph_client, CAT) == []
    assert [c.count(LATER) for c in _store_contents(ops, langgraph_client)] == [1]
