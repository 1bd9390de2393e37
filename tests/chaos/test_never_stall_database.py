"""A PostgreSQL that hangs or goes away never pins a namespace and never dead-letters a batch.

The database is reached through a loopback proxy the test freezes (the server accepts and
never answers, as a stopped backend or a black-holing network would) or stops (connection
refused), on the machine's real PostgreSQL.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.support.tcp_proxy import TcpProxy
from worker.consolidation.rules import RulesConsolidator
from worker.errors import StoreUnavailable
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.sweep import prepare_merges
from worker.settings import Settings
from worker.store.memory import MemoryStore

pytestmark = pytest.mark.postgres

#: Short timeouts, so a hang is cut off in a couple of seconds.
TIMEOUT = 1.0
#: Upper bound on any wait below; a hang turns into a failure, not a stuck suite.
BOUND_SECONDS = 30.0


@pytest.fixture
def proxy(pg_database_url: str) -> Iterator[TcpProxy]:
    url = sa.engine.make_url(pg_database_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as p:
        yield p


@pytest.fixture
def proxied_url(pg_database_url: str, proxy: TcpProxy) -> str:
    url = sa.engine.make_url(pg_database_url).set(host="127.0.0.1", port=proxy.port)
    return url.render_as_string(hide_password=False)


@pytest.fixture
def proxied_store(proxied_url: str, pg_database_url: str) -> Iterator[MemoryStore]:
    MemoryStore.from_url(pg_database_url, create=True).dispose()
    store = MemoryStore.from_url(proxied_url, connect_timeout=TIMEOUT, transaction_timeout=TIMEOUT)
    yield store
    store.dispose()


@pytest.fixture
def direct_store(pg_database_url: str) -> Iterator[MemoryStore]:
    store = MemoryStore.from_url(pg_database_url, create=True)
    yield store
    store.dispose()


def bounded(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Run ``fn`` in a thread; fail the test if it has not returned within the bound."""
    outcome: dict[str, object] = {}

    def call() -> None:
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the test below
            outcome["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(BOUND_SECONDS)
    assert not thread.is_alive(), f"{fn.__name__} still hangs after {BOUND_SECONDS} s"
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome.get("value")


def test_a_transaction_on_a_database_that_stopped_answering_fails_at_its_deadline(
    proxied_store: MemoryStore, proxy: TcpProxy
) -> None:
    proxied_store.load_state("user:warm")  # a pooled connection, established
    proxy.freeze()

    with pytest.raises(StoreUnavailable, match="rolled back"):
        bounded(proxied_store.load_state, "user:anyone")


def test_the_store_works_again_once_the_database_answers(
    proxied_store: MemoryStore, proxy: TcpProxy
) -> None:
    proxied_store.load_state("user:warm")
    proxy.freeze()
    with pytest.raises(StoreUnavailable):
        bounded(proxied_store.load_state, "user:anyone")
    proxy.thaw()

    assert bounded(proxied_store.load_state, "user:anyone").version == 0


def test_connecting_to_a_database_that_never_answers_fails_at_the_connect_timeout(
    proxied_url: str, proxy: TcpProxy
) -> None:
    proxy.freeze()

    with pytest.raises(StoreUnavailable):
        bounded(MemoryStore.from_url, proxied_url, connect_timeout=TIMEOUT)


def test_reconcile_against_a_hung_database_exits_unavailable(
    proxied_url: str, proxy: TcpProxy, settings: Settings, direct_store: MemoryStore
) -> None:
    proxy.freeze()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWORKER_")} | {
        "MEMWORKER_REDIS_URL": str(settings.redis_url),
        "MEMWORKER_KEY_PREFIX": settings.key_prefix,
        "MEMWORKER_DATABASE_URL": proxied_url,
        "MEMWORKER_DATABASE_CONNECT_TIMEOUT_SECONDS": str(TIMEOUT),
        "MEMWORKER_DATABASE_TIMEOUT_SECONDS": str(TIMEOUT),
        "MEMWORKER_DATA_DIR": str(settings.data_dir),
    }

    ran = subprocess.run(
        [sys.executable, "-m", "worker", "reconcile", "--user", "u1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND_SECONDS,
        check=False,
    )

    assert ran.returncode == 4, ran.stderr
    assert "database" in ran.stderr.lower()


def make_pipeline(queue: RedisQueue, store: MemoryStore, settings: Settings) -> Pipeline:
    return Pipeline(
        queue=queue,
        store=store,
        consolidator=RulesConsolidator(),
        settings=settings.for_consolidation,
        sinks=(),
    )


class BlockingConsolidator(RulesConsolidator):
    """Rules, but each merge waits until the test releases it (after the snapshot was read)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def merge(self, state, batch, *, now):  # type: ignore[no-untyped-def]
        self.entered.set()
        assert self.release.wait(BOUND_SECONDS)
        return super().merge(state, batch, now=now)


def test_a_commit_stuck_on_a_hung_database_loses_its_lease_and_is_fenced_out_when_it_lands(
    redis_client: object,
    settings: Settings,
    proxied_url: str,
    proxy: TcpProxy,
    direct_store: MemoryStore,
) -> None:
    # As a consolidate lane does at its start: the guards' one-off build (most of a second)
    # must not fall inside the stuck merge's 0.3 s, whichever test runs first.
    prepare_merges()
    cfg = settings.model_copy(update={"lease_seconds": 0.6, "max_merge_seconds": 0.3})
    queue = RedisQueue(redis_client, cfg.for_queue)  # type: ignore[arg-type]
    user = "u-" + settings.key_prefix
    candidate = make_candidate(user_id=user, trace_id="t1", text="I prefer green tea")
    queue.enqueue(candidate)
    ns = f"user:{user}"
    # A long client deadline: the heartbeat cap, not the SQL deadline, must free the namespace.
    stuck_store = MemoryStore.from_url(proxied_url, transaction_timeout=BOUND_SECONDS)
    claim = queue.claim_namespace(ns)
    assert claim is not None
    blocking = BlockingConsolidator()
    stuck_pipeline = Pipeline(
        queue=queue, store=stuck_store, consolidator=blocking, settings=cfg.for_consolidation
    )
    results: list[object] = []
    stuck = threading.Thread(target=lambda: results.append(stuck_pipeline.consolidate(claim)))
    stuck.start()
    assert blocking.entered.wait(BOUND_SECONDS)
    proxy.freeze()  # the snapshot is read; the commit will hang
    blocking.release.set()

    # The stuck worker's heartbeat gives up at the cap, so its lease simply runs out and
    # another worker takes the namespace over, without any clock being moved.
    deadline = time.monotonic() + BOUND_SECONDS
    takeover = None
    while takeover is None and time.monotonic() < deadline:
        takeover = queue.claim_namespace(ns)
        time.sleep(0.05)
    assert takeover is not None, "the stuck worker's lease never ended"
    taken = make_pipeline(queue, direct_store, cfg).consolidate(takeover)
    proxy.thaw()  # the stuck commit reaches the database now
    stuck.join(BOUND_SECONDS)
    stuck_store.dispose()

    assert taken.outcome == "committed"
    assert [r.outcome for r in results] == ["stale"]  # type: ignore[attr-defined]
    assert direct_store.load_state(ns).version == 1
    assert direct_store.already_recorded(ns, [candidate.id]) == {candidate.id}


def test_a_ten_minute_database_outage_dead_letters_nothing_and_heals_by_itself(
    redis_client: object,
    settings: Settings,
    proxied_url: str,
    proxy: TcpProxy,
    direct_store: MemoryStore,
) -> None:
    cfg = settings.model_copy(update={"max_attempts": 3, "outage_retry_max_seconds": 60})
    queue = RedisQueue(redis_client, cfg.for_queue)  # type: ignore[arg-type]
    users = [f"u{i}-{settings.key_prefix}" for i in range(3)]
    for user in users:
        queue.enqueue(make_candidate(user_id=user, trace_id="t1", text="I prefer green tea"))
    store = MemoryStore.from_url(proxied_url, connect_timeout=TIMEOUT, transaction_timeout=TIMEOUT)
    pipeline = make_pipeline(queue, store, cfg)
    proxy.stop()  # the database is down: connection refused

    # Ten simulated minutes of sweeps every 10 s (the queue's `now` test hook); every due
    # batch is attempted and fails on the database.
    start = queue.server_ms() / 1000 + cfg.max_wait_seconds
    outcomes = []
    for step in range(60):
        for claim in queue.claim_due(now=start + 10 * step):
            outcomes.append(pipeline.consolidate(claim).outcome)
    states = [queue.admin.namespace_state(f"user:{u}") for u in users]
    proxy.start()
    healed = [pipeline.consolidate(c).outcome for c in queue.claim_due(now=start + 601 + 3600)]
    store.dispose()

    assert len(outcomes) > 3 * cfg.max_attempts  # far more failures than max_attempts
    assert {(s.dead, s.attempts) for s in states} == {(False, 0)}
    assert healed == ["committed"] * 3
    assert [direct_store.load_state(f"user:{u}").version for u in users] == [1, 1, 1]
    assert queue.admin.dead_letters() == []
