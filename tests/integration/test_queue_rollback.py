"""A Redis restored from an older snapshot is detected, and never makes a new candidate look
already merged.

The restore keeps the shard's epoch key, so positions of the same epoch are compared: after a
commit whose position lies ahead (a server clock that ran fast, or a batch enqueued later than
the snapshot), the restored Redis issues new candidates ids at or below SQL's applied position.
Only the ledger may decide that a candidate is already merged; the position tells the rollback
apart, and it is logged and counted like an epoch change.

The snapshot is taken and restored with ``DUMP``/``RESTORE`` of every key of the deployment,
on the real Redis, exactly what restoring an RDB file of that moment does to those keys.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Final

import pytest

from tests.chaos.test_queue_epoch import _ledger_counts
from worker import metrics
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis import RedisClient
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import BatchResult, Pipeline, merge_entries
from worker.service.sweep import queue_health
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.types import Outcome

NS: Final = "user:u1"
DAY: Final = 86_400.0
#: New candidates enqueued after the restore.
NEW: Final = 3

Snapshot = dict[bytes, tuple[bytes, int]]


def _snapshot(client: RedisClient, prefix: str) -> Snapshot:
    """Every key of the deployment as ``DUMP`` serialises it, with its remaining TTL (ms)."""
    keys = list(client.scan_iter(match=f"{prefix}:*"))
    return {k: (client.dump(k), client.pttl(k)) for k in keys}  # type: ignore[misc]


def _restore(client: RedisClient, prefix: str, snapshot: Snapshot) -> None:
    """Redis as the snapshot had it: later keys gone, every snapshotted key as it was."""
    for key in list(client.scan_iter(match=f"{prefix}:*")):
        client.delete(key)
    for key, (dumped, ttl) in snapshot.items():
        client.restore(key, max(ttl, 0), dumped, replace=True)


def _merge(
    queue: RedisQueue, store: MemoryStore, settings: Settings, now: float | None = None
) -> BatchResult:
    claim = queue.claim_namespace(NS, now=now)
    assert claim is not None
    return Pipeline(queue, store, RulesConsolidator(), settings.for_consolidation).consolidate(
        claim
    )


def _enqueue(queue: RedisQueue, label: str, n: int, now: float | None = None) -> list[str]:
    ids = []
    for i in range(n):
        c = make_candidate(
            user_id="u1", trace_id=f"{label}{i}", text=f"Remember that {label} fact {i} holds"
        )
        queue.enqueue(c, now=now)
        ids.append(c.id)
    return ids


def _roll_back_over_a_commit_from_ahead(
    redis_client: RedisClient, settings: Settings, queue: RedisQueue, store: MemoryStore
) -> dict[int, str | None]:
    """Commit a batch, snapshot Redis, commit a batch from a day ahead, restore the snapshot;
    returns the epochs both commits were made in."""
    _enqueue(queue, "first", 1)
    assert _merge(queue, store, settings).outcome is Outcome.COMMITTED
    snapshot = _snapshot(redis_client, settings.key_prefix)
    ahead = time.time() + DAY
    _enqueue(queue, "ahead", 1, now=ahead)
    assert _merge(queue, store, settings, now=ahead).outcome is Outcome.COMMITTED
    epochs = queue.admin.epochs()
    _restore(redis_client, settings.key_prefix, snapshot)
    return epochs


def test_candidates_enqueued_after_redis_was_restored_from_an_older_snapshot_are_all_merged(
    redis_client: RedisClient, settings: Settings, queue: RedisQueue, sqlite_store: MemoryStore
) -> None:
    committed_in = _roll_back_over_a_commit_from_ahead(redis_client, settings, queue, sqlite_store)
    assert queue.admin.epochs() == committed_in  # the restore kept the epoch: no epoch change

    ids = _enqueue(queue, "new", NEW)
    result = _merge(queue, sqlite_store, settings)

    assert result.outcome is Outcome.COMMITTED
    assert result.candidates == NEW
    assert _ledger_counts(sqlite_store, ids) == [1] * NEW


def test_a_rollback_is_logged_at_error_and_counted(
    redis_client: RedisClient,
    settings: Settings,
    queue: RedisQueue,
    sqlite_store: MemoryStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _roll_back_over_a_commit_from_ahead(redis_client, settings, queue, sqlite_store)
    rollbacks = metrics.QUEUE_ROLLBACKS._value.get()
    changes = metrics.QUEUE_EPOCH_CHANGES._value.get()

    with caplog.at_level(logging.ERROR, logger="worker.service.consolidate"):
        _enqueue(queue, "new", NEW)
        _merge(queue, sqlite_store, settings)

    assert metrics.QUEUE_ROLLBACKS._value.get() == rollbacks + 1
    assert metrics.QUEUE_EPOCH_CHANGES._value.get() == changes + 1
    errors = [r.getMessage() for r in caplog.records if "queue rolled back" in r.getMessage()]
    assert len(errors) == 1
    assert f"{NEW} new candidate(s)" in errors[0]


def test_a_redelivered_committed_batch_is_acknowledged_without_a_rollback_alarm(
    settings: Settings, queue: RedisQueue, sqlite_store: MemoryStore
) -> None:
    _enqueue(queue, "once", NEW)
    claim = queue.claim_namespace(NS)
    assert claim is not None
    entries = queue.read_batch(claim)
    pipeline = Pipeline(queue, sqlite_store, RulesConsolidator(), settings.for_consolidation)
    assert pipeline.consolidate(claim).outcome is Outcome.COMMITTED
    rollbacks = metrics.QUEUE_ROLLBACKS._value.get()

    # The same entries again, as after a lost ack: every candidate is in the ledger.
    merged = merge_entries(
        sqlite_store,
        RulesConsolidator(),
        settings,
        NS,
        entries,
        now=datetime.now(UTC),
        epoch=claim.epoch,
    )

    assert merged.result.outcome is Outcome.NOTHING_NEW
    assert merged.result.skipped == NEW
    assert merged.rolled_back == 0
    assert metrics.QUEUE_ROLLBACKS._value.get() == rollbacks


def test_status_reports_a_rollback_before_any_batch_runs(
    redis_client: RedisClient, settings: Settings, queue: RedisQueue, sqlite_store: MemoryStore
) -> None:
    assert queue_health(queue.admin, sqlite_store)["rollback"]["detected"] is False
    _roll_back_over_a_commit_from_ahead(redis_client, settings, queue, sqlite_store)

    health = queue_health(queue.admin, sqlite_store)

    assert health["epoch"]["changed"] is False  # the same epoch: only the positions tell
    assert (health["rollback"]["detected"], health["rollback"]["namespaces"]) == (True, 1)
    assert "older snapshot" in health["rollback"]["meaning"]
