"""Experiment: the pipeline's PostgreSQL connection is terminated in the middle of its commit.

A SQLAlchemy event hook fires inside the commit transaction and, from a second connection,
runs ``pg_terminate_backend`` on the pipeline's own backend. Nothing of the batch may remain
(no namespace version, file version, entry or ledger row), its candidates stay pending, and a
later retry commits each of them exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import sqlalchemy as sa
from sqlalchemy import event

from tests.chaos_support.harness import audit_store
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.settings import Settings
from worker.store.memory import MemoryStore

pytestmark = pytest.mark.postgres

#: Far enough past every debounce and backoff that the batch is due (claims take ``now``).
LATER = 3600.0


@pytest.fixture
def store(pg_database_url: str) -> Iterator[MemoryStore]:
    store = MemoryStore.from_url(pg_database_url, create=True)
    yield store
    store.dispose()


class Terminator:
    """Terminates the backend of the connection that reaches ``point`` while armed."""

    def __init__(self, store: MemoryStore, database_url: str, point: str) -> None:
        self.admin = sa.create_engine(database_url, isolation_level="AUTOCOMMIT")
        self.armed = False
        self.fired = 0
        if point == "before COMMIT":
            event.listen(store.engine, "commit", self._on_commit)
        else:
            event.listen(store.engine, "after_cursor_execute", self._after_execute)
        self.point = point

    def _on_commit(self, conn: Any) -> None:
        self._terminate(conn)

    def _after_execute(self, conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(self.point):
            self._terminate(conn)

    def _terminate(self, conn: Any) -> None:
        if not self.armed:
            return
        self.armed = False
        pid = conn.connection.dbapi_connection.info.backend_pid
        with self.admin.connect() as admin:
            # With a timeout, pg_terminate_backend returns once the backend has exited.
            assert admin.execute(sa.text("SELECT pg_terminate_backend(:p, 10000)"), {"p": pid})
        self.fired += 1


@pytest.mark.parametrize("point", ["INSERT INTO ENTRIES", "INSERT INTO CANDIDATE_LEDGER",
                                   "before COMMIT"])  # fmt: skip
def test_a_connection_terminated_mid_commit_leaves_nothing_and_a_retry_commits_once(
    point: str,
    settings: Settings,
    store: MemoryStore,
    pg_database_url: str,
    redis_client: redis.Redis,
) -> None:
    cfg = settings.model_copy(update={"database_url": pg_database_url, "sinks": []})
    queue = RedisQueue(redis_client, cfg.for_queue)
    pipeline = Pipeline(
        queue=queue, store=store, consolidator=RulesConsolidator(), settings=cfg.for_consolidation
    )
    user = "u" + uuid.uuid4().hex[:10]
    ns = f"user:{user}"
    batch = [
        make_candidate(user_id=user, trace_id=f"t{n}", text=f"Drawer {n} holds {n * 3} keys")
        for n in range(5)
    ]
    for candidate in batch:
        queue.enqueue(candidate)
    ids = {c.id for c in batch}
    terminator = Terminator(store, pg_database_url, point)
    terminator.armed = True

    (claim,) = queue.claim_due(now=time.time() + LATER)
    failed = pipeline.consolidate(claim)

    assert terminator.fired == 1
    assert failed.outcome == "failed"
    assert "rolled back" in (failed.error or "")
    assert store.load_state(ns).version == 0
    audit = audit_store(pg_database_url)
    assert ns not in audit.ledger
    assert ns not in audit.entry_candidates
    assert not [where for where in audit.file_versions if where[0] == ns]
    assert {c.id for _, c in queue.admin.pending(ns)} == ids

    (retry,) = queue.claim_due(now=time.time() + 2 * LATER)
    assert pipeline.consolidate(retry).outcome == "committed"
    audit = audit_store(pg_database_url)
    assert sorted(audit.ledger[ns]) == sorted(ids)
    assert sorted(audit.entry_candidates[ns]) == sorted(ids)
    assert queue.admin.pending(ns) == []
