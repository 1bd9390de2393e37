"""The database's clock decides every SQL-side time that two worker processes compare.

A worker host a day fast or a day slow delivers to a sink that is down: its breaker opens for
the first window on the database's clock (not until tomorrow, nor already in the past), each
failed row is retried after its first backoff, and a claim it makes is live for one lease, so
a worker with a right clock neither waits a day nor takes the claim over at once. The same
worker's commit writes its run row and its outbox rows on the database's clock, so what it
published is due for every deliverer at once, and an operator's ``forget`` from a host a day
off queues tombstones every deliverer finds due at once.

Two ways of skewing the worker: its whole process under ``faketime`` (PostgreSQL: the server's
clock is another machine's, as in production), and its Python clock moved with time-machine
inside this process (SQLite and PostgreSQL; an embedded SQLite file lives on one host, so only
the worker's own clock can be wrong there, and SQLite's ``'now'`` is read below Python).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final

import pytest
import sqlalchemy as sa
import time_machine

from tests.support.skewed import PROCESS_TIMEOUT_SECONDS, faketime
from worker.connectors.files import FilesSink
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.publish import CLAIM_LEASE, FIRST_RETRY_SECONDS, deliver_due
from worker.service.transfer import erase
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.store.outbox import BREAKER_FIRST_OPEN_SECONDS, BREAKER_THRESHOLD
from worker.store.schema import outbox

DAY: Final = timedelta(days=1)
#: Real time between the skewed worker's writes and this test's read of the database's clock
#: (a subprocess start under faketime included).
SLACK: Final = timedelta(seconds=30)

_WORKER: Final = """
import sys, time
from worker.service.publish import CLAIM_LEASE, deliver_due
from worker.connectors.files import FilesSink
from worker.store.memory import MemoryStore
url, broken, held, root = sys.argv[1:5]
print(time.time(), flush=True)
store = MemoryStore.from_url(url)
deliver_due(store, {broken: FilesSink(root)}, claimant="skewed")
store.claim_outbox(sink=held, claimant="skewed", lease=CLAIM_LEASE, limit=100)
store.dispose()
"""


class Deployment:
    """A store with one file per user queued for a sink that is down and for one held sink."""

    def __init__(self, store: MemoryStore, tmp_path: Path) -> None:
        tag = uuid.uuid4().hex[:8]
        self.store = store
        self.broken, self.held = f"down{tag}", f"held{tag}"
        self.root = tmp_path / "not-a-directory"
        self.root.write_text("a file where the sink's folder should be")
        self.users = [f"u{tag}{i}" for i in range(BREAKER_THRESHOLD)]
        for user in self.users:
            store.put_file(
                namespace=f"user:{user}",
                path="/memories/notes.md",
                content="- likes tea\n",
                author="test",
                sinks=[self.broken, self.held],
                now=store.db_now(),
            )

    def rows(self, sink: str) -> list[sa.Row[tuple[object, ...]]]:
        with self.store.engine.connect() as conn:
            return list(conn.execute(sa.select(outbox).where(outbox.c.sink == sink)))


@pytest.fixture
def deployment(database_url: str, tmp_path: Path) -> Iterator[Deployment]:
    store = MemoryStore.from_url(database_url, create=True)
    yield Deployment(store, tmp_path)
    store.dispose()


def _deliver_in_process(d: Deployment) -> None:
    deliver_due(d.store, {d.broken: FilesSink(d.root)}, claimant="skewed")
    d.store.claim_outbox(sink=d.held, claimant="skewed", lease=CLAIM_LEASE, limit=100)


def _assert_times_are_the_databases(d: Deployment) -> None:
    now = d.store.db_now()
    (health,) = d.store.sink_health(d.broken)
    assert health.open_until is not None
    assert timedelta(0) < health.open_until - now <= timedelta(seconds=BREAKER_FIRST_OPEN_SECONDS)
    assert health.state(now) == "open"
    failed = d.rows(d.broken)
    assert len(failed) == BREAKER_THRESHOLD
    for row in failed:
        assert row.attempts == 1
        wait = row.next_attempt_at - now
        assert timedelta(0) < wait <= timedelta(seconds=FIRST_RETRY_SECONDS)
    held = d.rows(d.held)
    assert [r.claimed_by for r in held] == ["skewed"] * BREAKER_THRESHOLD
    for row in held:
        assert CLAIM_LEASE - SLACK < row.claim_expires_at - now <= CLAIM_LEASE
    # A worker with a right clock finds the claims live: it takes none of them over.
    taken = d.store.claim_outbox(sink=d.held, claimant="right", lease=CLAIM_LEASE, limit=100)
    assert taken == []


@pytest.mark.parametrize("offset", [DAY, -DAY], ids=["a-day-fast", "a-day-slow"])
def test_a_worker_whose_python_clock_is_a_day_off_uses_the_databases_time(
    deployment: Deployment, offset: timedelta
) -> None:
    with time_machine.travel(datetime.now().astimezone() + offset, tick=True):
        _deliver_in_process(deployment)

    _assert_times_are_the_databases(deployment)


@pytest.mark.postgres
@pytest.mark.parametrize("offset", ["+1d", "-1d"], ids=["a-day-fast", "a-day-slow"])
def test_a_worker_process_a_day_off_under_faketime_uses_the_servers_time(
    pg_database_url: str, tmp_path: Path, offset: str
) -> None:
    store = MemoryStore.from_url(pg_database_url, create=True)
    try:
        d = Deployment(store, tmp_path)
        done = subprocess.run(
            [faketime(), "-f", offset, sys.executable, "-c", _WORKER,
             pg_database_url, d.broken, d.held, str(d.root)],
            capture_output=True, text=True, timeout=PROCESS_TIMEOUT_SECONDS, check=True,
        )  # fmt: skip
        believed = datetime.fromtimestamp(float(done.stdout.split()[0])).astimezone()
        skew = believed - store.db_now()
        assert abs(skew) > DAY - SLACK  # the worker really believed it was a day off

        _assert_times_are_the_databases(d)
    finally:
        store.dispose()


@pytest.mark.parametrize("offset", [DAY, -DAY], ids=["a-day-fast", "a-day-slow"])
def test_a_worker_a_day_off_commits_rows_stamped_and_due_by_the_databases_clock(
    database_url: str, queue: RedisQueue, settings: Settings, offset: timedelta
) -> None:
    store = MemoryStore.from_url(database_url, create=True)
    try:
        user = "u" + uuid.uuid4().hex[:10]
        sink = f"files{user}"
        queue.enqueue(make_candidate(user_id=user, trace_id="t", text="I prefer green tea"))
        claim = queue.claim_namespace(f"user:{user}")
        assert claim is not None
        with time_machine.travel(datetime.now().astimezone() + offset, tick=True):
            Pipeline(
                queue, store, RulesConsolidator(), settings.for_consolidation, sinks=(sink,)
            ).consolidate(claim)
        now = store.db_now()

        (run,) = store.runs(namespace=f"user:{user}")
        assert abs(run.started_at - now) < SLACK
        # Due at once for a worker with a right clock: not tomorrow, and claimable now.
        (due,) = [
            i for i in store.due_outbox(sink=sink, limit=10_000) if i.namespace == run.namespace
        ]
        assert abs(due.modified_at - now) < SLACK
    finally:
        store.dispose()


@pytest.mark.parametrize("offset", [DAY, -DAY], ids=["a-day-fast", "a-day-slow"])
def test_an_erase_on_a_host_a_day_off_queues_tombstones_due_now_by_the_databases_clock(
    deployment: Deployment, queue: RedisQueue, offset: timedelta
) -> None:
    d = deployment
    keys = [f"user:{u}" for u in d.users]
    with time_machine.travel(datetime.now().astimezone() + offset, tick=True):
        erase(queue.admin, d.store, {}, keys)
    now = d.store.db_now()

    tombstones = [r for r in d.rows(d.held) if r.kind == "erase"]
    assert len(tombstones) == BREAKER_THRESHOLD
    assert all(abs(r.next_attempt_at - now) < SLACK for r in tombstones)
    due = d.store.due_outbox(sink=d.held, limit=10_000)  # a worker with a right clock
    assert sorted(i.namespace for i in due if i.deleted) == sorted(keys)
