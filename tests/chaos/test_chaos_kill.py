"""Experiment: worker processes SIGKILLed at random points while candidates keep arriving.

Three worker processes (``tests/chaos_support/worker_loop.py``, forked from a preloaded
forkserver so a replacement starts in milliseconds) consolidate into a throwaway PostgreSQL
database with a short lease, while this test enqueues continuously across several namespaces
and SIGKILLs workers: half at a random moment, half at a chosen stage of the pipeline (lease
held, batch read, plan merged, inside the commit transaction, committed but not acknowledged,
acknowledged). Each killed worker is replaced. When the kills are done, healthy workers drain
the queue (lease expiry → re-claim) and the database is audited.

The candidates come from three chat hosts: this process, and two processes under ``faketime``
whose clocks run a day fast and a day slow (``tests/chaos_support/enqueuer.py``); retried
captures may come back through another host. Redis is a private server with AOF
(``appendfsync always``), as production runs it.

Halfway through the kills one user is erased (the service's ``erase``, as ``memworker forget``
runs it, retried while a worker holds the namespace): none of the candidates enqueued for that
user before the erase may reach the database afterwards (0 resurrected), and every one
enqueued after it is merged exactly once, like every other namespace's. Three quarters of the
way through, Redis itself is SIGKILLed mid-traffic and restarted on its AOF: an enqueue while
it is down raises ``QueueUnavailable``, the workers wait it out, nothing acknowledged is lost,
and the queue epoch is unchanged (a restart that keeps its data is not a data loss). Redis
restarted *empty* loses what was queued by definition; that case is specified by
``tests/chaos/test_queue_epoch.py``, where exactly which candidates survive is known.

``MEMWORKER_CHAOS_SCALE`` multiplies the number of kills (default 1: 100 kills).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from tests.chaos_support.harness import (
    ChatHost,
    Fleet,
    HostRefused,
    audit_store,
    duplicates,
    pending_ids,
    queue_settled,
    settings_env,
    throwaway_database,
    version_problems,
    wait_until,
)
from tests.chaos_support.worker_loop import STAGES
from tests.conftest import PG_SERVER_URL
from tests.support.private_redis import PrivateRedis, private_redis
from worker.errors import QueueUnavailable
from worker.queue.client import MemoryClient
from worker.queue.redis_queue import RedisQueue
from worker.service.transfer import erase
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.types import DEFAULT_SOCKET_TIMEOUT_SECONDS

SCALE: Final = float(os.environ.get("MEMWORKER_CHAOS_SCALE", "1"))
KILLS: Final = max(1, round(100 * SCALE))
WORKERS: Final = 3
ARRIVALS_PER_SECOND: Final = 30.0
#: Share of enqueues that repeat an earlier idempotency key (a retried capture).
RETRY_SHARE: Final = 0.05
#: A self-killing worker that has not reached its stage this long after start-up is killed.
STAGE_FALLBACK_SECONDS: Final = 2.0
KILL_PHASE_SECONDS: Final = 300.0 * max(1.0, SCALE)
DRAIN_SECONDS: Final = 120.0
#: Clock offsets of the chat hosts besides this process (``faketime -f``): a day either way.
SKEWS: Final = ("+1d", "-1d")
DAY: Final = 86_400.0
#: A host's clock is "skewed by a day" when it is within this much of a day off.
SKEW_TOLERANCE_SECONDS: Final = 3_600.0
#: How long Redis stays down: long enough for every worker's sweeps and heartbeats to fail.
OUTAGE_SECONDS: Final = 0.5
#: Attempts of one enqueue while the hot path times out (8 × its 0.25 s: a stall of Redis
#: longer than 2 s is a failure of the experiment, not load).
TIMEOUT_ATTEMPTS: Final = 8
#: What the hot path's QueueUnavailable says when Redis took longer than its timeout.
TIMED_OUT: Final = "did not answer within"
#: Redis durability of the experiment: every acknowledged write is on disk.
AOF_ARGS: Final = ("--appendonly", "yes", "--appendfsync", "always")

#: (scope, user, assistant): user-scope, per-assistant user-scope and agent-scope namespaces.
TARGETS: Final = (
    ("user", "u0", None),
    ("user", "u1", None),
    ("user", "u1", "bot-a"),
    ("user", "u2", "bot-a"),
    ("agent", None, "bot-a"),
    ("agent", None, "bot-b"),
)
#: The user erased halfway through the kills.
FORGOTTEN: Final = "user:u0"
COLOURS: Final = ("red", "green", "blue", "amber", "violet", "teal", "ochre", "white")
THINGS: Final = ("kite", "teapot", "atlas", "violin", "lantern", "compass", "quilt", "sextant")


@pytest.fixture(scope="module")
def chaos_database() -> Iterator[str]:
    with throwaway_database(PG_SERVER_URL) as url:
        yield url


@pytest.fixture
def chaos_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    """A private Redis with AOF, which the experiment kills and restarts."""
    with private_redis(tmp_path_factory.mktemp("chaosredis"), *AOF_ARGS) as server:
        yield server


@pytest.fixture
def chaos_settings(settings: Settings, chaos_database: str, chaos_redis: PrivateRedis) -> Settings:
    return settings.model_copy(
        update={
            "redis_url": chaos_redis.url,
            "database_url": chaos_database,
            "debounce_seconds": 0.05,
            "max_wait_seconds": 0.25,
            "lease_seconds": 1.5,
            "max_attempts": 1000,
            "retry_backoff_seconds": 0.1,
            "file_budget_bytes": 10_000_000,
            "sinks": [],
            # The production deadline, which the conftest lifts for the rest of the suite:
            # this experiment sends again on a timeout, as a chat service does (_answered).
            "socket_timeout_seconds": DEFAULT_SOCKET_TIMEOUT_SECONDS,
        }
    )


def _namespace(scope: str, user: str | None, assistant: str | None) -> str:
    if scope == "agent":
        return f"agent:{assistant}"
    return f"user:{user}" + (f":{assistant}" if assistant else "")


def _answered(send: Callable[[], str], timeouts: list[str]) -> str:
    """``send()``, sent again while the hot path times out, as a chat service does on the
    client's own advice ("retrying with the same idempotency_key is safe"): with workers
    SIGKILLed and forked beside an ``appendfsync always`` Redis on a shared machine, Redis can
    stall past the client's 0.25 s now and then. A timed-out enqueue may still have landed, so
    the audit then also checks that its resend was merged once. Any other refusal, or a stall
    through every attempt, fails the experiment."""
    for _ in range(TIMEOUT_ATTEMPTS - 1):
        try:
            return send()
        except (QueueUnavailable, HostRefused) as exc:
            if TIMED_OUT not in str(exc):
                raise
            timeouts.append(str(exc))
    return send()


def _start(fleet: Fleet, rng: random.Random) -> None:
    if rng.random() < 0.5:
        fleet.start("timer")
    else:
        fleet.start(rng.choice(STAGES), die_on=rng.randint(1, 3))


@pytest.mark.chaos
@pytest.mark.postgres
@pytest.mark.timeout(900)
def test_sigkilled_workers_neither_lose_nor_duplicate_a_candidate(
    chaos_settings: Settings, chaos_redis: PrivateRedis, tmp_path: Path
) -> None:
    seed = int(os.environ.get("MEMWORKER_CHAOS_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    state_dir = tmp_path / "fleet"
    state_dir.mkdir()
    fleet = Fleet(settings_env(chaos_settings), state_dir, forked=True)
    queue = RedisQueue(chaos_redis.client(), chaos_settings.for_queue)
    queue.admin.publish_policy()  # the deployment's debounce, as its workers write it at start
    enqueued: dict[str, set[str]] = {_namespace(*t): set() for t in TARGETS}
    sent: list[tuple[tuple[str, str | None, str | None], str, str]] = []
    kills_by_mode: dict[str, int] = {}
    by_host: dict[str, int] = {}
    arrivals = retries = 0
    timeouts: list[str] = []  # enqueues sent again after the hot path's timeout
    erased: set[str] | None = None  # ids of FORGOTTEN enqueued before its erase
    refused_while_down: str | None = None  # what an enqueue said while Redis was down
    erase_store = MemoryStore.from_url(str(chaos_settings.database_url))
    hosts: list[ChatHost] = []
    started = time.monotonic()
    try:
        hosts.extend(ChatHost.start(offset, chaos_settings) for offset in SKEWS)
        with MemoryClient(chaos_settings) as client:

            def enqueue() -> None:
                nonlocal arrivals, retries
                if sent and rng.random() < RETRY_SHARE:
                    retries += 1
                    target, text, key = rng.choice(sent)
                else:
                    arrivals += 1
                    target = rng.choice(TARGETS)
                    text = (
                        f"Item {arrivals} of the collection is a {rng.choice(COLOURS)} "
                        f"{rng.choice(THINGS)}"
                    )
                    key = f"arrival-{arrivals}"
                    sent.append((target, text, key))
                scope, user, assistant = target
                fields = {
                    "user_id": user, "assistant_id": assistant, "scope": scope,
                    "trace_id": f"t-{key}", "text": text, "idempotency_key": key,
                }  # fmt: skip
                host = rng.choice([None, *hosts])  # a retry may come through another host
                cid = _answered(
                    lambda: client.enqueue(**fields) if host is None else host.enqueue(**fields),  # type: ignore[arg-type]
                    timeouts,
                )
                name = "correct" if host is None else host.offset
                by_host[name] = by_host.get(name, 0) + 1
                enqueued[_namespace(*target)].add(cid)

            def restart_redis() -> str:
                """SIGKILL Redis mid-traffic, enqueue while it is down, restart it on its AOF."""
                chaos_redis.stop()
                try:
                    client.enqueue(user_id="u0", trace_id="t-down", text="Sent while Redis is down")
                except QueueUnavailable as exc:
                    refusal = str(exc)
                else:
                    raise AssertionError("an enqueue to a killed Redis returned an id")
                with pytest.raises(HostRefused, match="QueueUnavailable"):
                    hosts[0].enqueue(user_id="u1", trace_id="t-down", text="Also sent while down")
                time.sleep(OUTAGE_SECONDS)  # the outage's length, so workers meet it mid-work
                chaos_redis.start()
                return refusal

            for _ in range(WORKERS):
                _start(fleet, rng)
            next_arrival = time.monotonic()
            kills = 0
            while kills < KILLS:
                now = time.monotonic()
                assert now - started < KILL_PHASE_SECONDS, f"kill phase too slow (seed {seed})"
                while next_arrival <= now:
                    enqueue()
                    next_arrival += 1 / ARRIVALS_PER_SECOND
                for worker in list(fleet.processes):
                    if worker.kill_at is None and fleet.ready(worker):
                        delay = (
                            rng.uniform(0.0, 0.4)
                            if worker.mode == "timer"
                            else STAGE_FALLBACK_SECONDS
                        )
                        worker.kill_at = now + delay
                    if worker.kill_at is not None and now >= worker.kill_at:
                        if worker.mode != "timer":
                            worker.mode += " (not reached: timer)"
                        fleet.kill(worker)
                for worker in fleet.reap():
                    code = worker.proc.returncode
                    assert code == -9, f"worker exited with {code}:\n{fleet.stderr()[-3000:]}"
                    kills += 1
                    kills_by_mode[worker.mode] = kills_by_mode.get(worker.mode, 0) + 1
                if erased is None and kills >= KILLS // 2:
                    done = erase(queue.admin, erase_store, {}, [FORGOTTEN], now=datetime.now(UTC))
                    if not done.busy:  # else a worker holds it: try again next round
                        erased, enqueued[FORGOTTEN] = enqueued[FORGOTTEN], set()
                if erased is not None and refused_while_down is None and kills >= KILLS * 3 // 4:
                    refused_while_down = restart_redis()
                while len(fleet.processes) < WORKERS:
                    _start(fleet, rng)
                time.sleep(0.005)  # pacing of the driver loop, not a synchronisation
            kill_phase = time.monotonic() - started
            # Drain: healthy workers only; expired leases are re-claimed.
            for worker in list(fleet.processes):
                fleet.kill(worker)
            fleet.reap()
            for _ in range(WORKERS):
                fleet.start("none")
            wait_until(lambda: queue_settled(queue, enqueued), "the queue to drain", DRAIN_SECONDS)
    finally:
        fleet.stop_all()
        for host in hosts:
            host.close()
        erase_store.dispose()
    outcomes = fleet.outcomes()
    audit = audit_store(str(chaos_settings.database_url))
    pending = pending_ids(queue, enqueued)
    dead = queue.admin.dead_letters()
    total = sum(len(ids) for ids in enqueued.values())
    waited_out = sum(fleet.stderr().count(s) for s in ("sweep failed", "interrupted", "failed:"))
    print(
        f"\nCHAOS kill: seed={seed} kills={sum(kills_by_mode.values())} by mode={kills_by_mode} "
        f"candidates={total} (+{retries} retried enqueues, {len(timeouts)} sent again after a "
        f"timeout) by host={by_host} "
        f"kill phase={kill_phase:.1f}s total={time.monotonic() - started:.1f}s "
        f"outcomes={dict(outcomes)} dead={len(dead)} erased={len(erased or ())} "
        f"worker calls that met the Redis restart={waited_out}"
    )

    for host in hosts:
        skew = host.believed_time - time.time()
        expected = DAY if host.offset.startswith("+") else -DAY
        assert abs(skew - expected) < SKEW_TOLERANCE_SECONDS, f"{host.offset}: skew {skew:.0f} s"
    assert refused_while_down is not None, f"Redis was never restarted (seed {seed})"
    assert "nothing was enqueued" in refused_while_down
    assert "queue epoch changed" not in fleet.stderr(), "a restart on AOF looked like data loss"
    assert erased is not None, f"the erase never found {FORGOTTEN} free (seed {seed})"
    resurrected = (erased - enqueued[FORGOTTEN]) & set(audit.ledger.get(FORGOTTEN, []))
    resurrected |= (erased - enqueued[FORGOTTEN]) & set(audit.entry_candidates.get(FORGOTTEN, []))
    assert not resurrected, f"{len(resurrected)} erased candidates came back (seed {seed})"
    for ns, ids in enqueued.items():
        ledger = audit.ledger.get(ns, [])
        assert duplicates(ledger) == {}, f"{ns}: ledger rows repeated (seed {seed})"
        assert set(ledger) <= ids, f"{ns}: ledger holds candidates never enqueued there"
        lost = ids - set(ledger) - set(pending[ns])
        assert not lost, f"{ns}: {len(lost)} candidates lost (seed {seed})"
        assert set(ledger) == ids, f"{ns}: {len(ids - set(ledger))} not merged (seed {seed})"
        merged_into = audit.entry_candidates.get(ns, [])
        assert duplicates(merged_into) == {}, f"{ns}: a candidate was merged twice (seed {seed})"
        assert set(merged_into) == ids
        texts = audit.active_texts.get(ns, [])
        assert duplicates(texts) == {}, f"{ns}: duplicate active entries (seed {seed})"
        content = audit.current_files[(ns, "/memories/facts.md")]
        assert sorted(line[2:] for line in content.splitlines() if line.startswith("- ")) == sorted(
            texts
        )
    assert dead == []
    assert version_problems(audit) == []
