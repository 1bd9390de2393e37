"""Experiment: eight worker processes on the same few namespaces, some batches turned zombies.

A zombie batch's heartbeats are silently dropped and it commits only after another worker has
taken its lease over — a worker paused by GC or cut off from Redis. The database fence must make
every such late commit either win cleanly or be rejected: file versions stay strictly
sequential and every candidate is merged exactly once (no lost update, no double merge).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
import redis

from tests.chaos_support.harness import (
    Fleet,
    audit_store,
    duplicates,
    queue_settled,
    settings_env,
    throwaway_database,
    version_problems,
    wait_until,
)
from tests.conftest import PG_SERVER_URL
from worker.queue.client import MemoryClient
from worker.queue.redis_queue import RedisQueue
from worker.settings import Settings

WORKERS: Final = 8
USERS: Final = ("alice", "bob", "carol")
CANDIDATES: Final = 600
ARRIVALS_PER_SECOND: Final = 60.0
ZOMBIE_SHARE: Final = 0.2
DRAIN_SECONDS: Final = 180.0


@pytest.fixture(scope="module")
def fleet_database() -> Iterator[str]:
    with throwaway_database(PG_SERVER_URL) as url:
        yield url


@pytest.mark.chaos
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_eight_workers_with_zombies_keep_versions_sequential_and_merge_each_candidate_once(
    settings: Settings, fleet_database: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    cfg = settings.model_copy(
        update={
            "database_url": fleet_database,
            "debounce_seconds": 0.02,
            "max_wait_seconds": 0.1,
            "lease_seconds": 1.0,
            "max_attempts": 1000,
            "retry_backoff_seconds": 0.05,
            "file_budget_bytes": 10_000_000,
            "sinks": [],
        }
    )
    rng = random.Random(7)
    state_dir = tmp_path / "fleet"
    state_dir.mkdir()
    fleet = Fleet(settings_env(cfg), state_dir)
    queue = RedisQueue(redis_client, cfg.for_queue)
    enqueued: dict[str, set[str]] = {f"user:{u}": set() for u in USERS}
    started = time.monotonic()
    try:
        for _ in range(WORKERS):
            fleet.start("none", zombie=ZOMBIE_SHARE)
        wait_until(lambda: all(fleet.ready(w) for w in fleet.processes), "workers", 120)
        with MemoryClient(cfg) as client:
            next_arrival = time.monotonic()
            for n in range(CANDIDATES):
                while time.monotonic() < next_arrival:
                    time.sleep(0.001)  # pacing arrivals, not a synchronisation
                next_arrival += 1 / ARRIVALS_PER_SECOND
                user = rng.choice(USERS)
                cid = client.enqueue(
                    user_id=user, trace_id=f"t{n}", text=f"Shelf {n} holds book number {n * 7}"
                )
                enqueued[f"user:{user}"].add(cid)
        wait_until(lambda: queue_settled(queue, enqueued), "the queue to drain", DRAIN_SECONDS)
        assert all(w.proc.poll() is None for w in fleet.processes), fleet.stderr()[-3000:]
    finally:
        fleet.stop_all()
    outcomes = fleet.outcomes()
    audit = audit_store(fleet_database)
    print(
        f"\nCHAOS fleet: workers={WORKERS} candidates={CANDIDATES} "
        f"took={time.monotonic() - started:.1f}s outcomes={dict(outcomes)}"
    )
    assert queue.admin.dead_letters() == []
    assert version_problems(audit) == []
    for ns, ids in enqueued.items():
        assert duplicates(audit.ledger[ns]) == {}
        assert set(audit.ledger[ns]) == ids, f"{ns}: {len(ids - set(audit.ledger[ns]))} lost"
        assert duplicates(audit.entry_candidates[ns]) == {}, f"{ns}: a candidate merged twice"
        assert set(audit.entry_candidates[ns]) == ids
        assert duplicates(audit.active_texts[ns]) == {}
