"""A minimal worker process for the chaos experiments: claim_due → Pipeline.consolidate, forever.

Settings come from ``MEMWORKER_*`` like a real worker. Fault injection is configured by
``MEMWORKER_CHAOS_*`` variables and lives only here, by wrapping the queue and the store the
pipeline is given (the pipeline itself is the production code):

``MEMWORKER_CHAOS_STATE_DIR``
    Folder where the process writes ``<pid>.ready`` once it can work, and appends one JSON
    line per consolidation to ``<pid>.log`` (outcome, namespace, candidates).
``MEMWORKER_CHAOS_DIE_AT`` / ``MEMWORKER_CHAOS_DIE_ON``
    SIGKILL this process the ``DIE_ON``-th time it reaches stage ``DIE_AT``: ``claimed`` (lease
    held, nothing read), ``read`` (batch read), ``merged`` (plan built, before the transaction),
    ``in_commit`` (every row written, before COMMIT), ``committed`` (after COMMIT, before the
    ack) or ``acked``.
``MEMWORKER_CHAOS_ZOMBIE``
    Probability that a batch becomes a zombie: its heartbeats are silently dropped, and before
    committing it waits until another worker has taken its lease over (or a deadline passes),
    then commits anyway, as a worker paused by GC or a network partition would.

A Redis or database outage (a restart during the experiment) is waited out: the failed call
is logged to stderr and the loop sweeps again, as a Celery task retries an ``Unavailable``.

Run as ``python -m tests.chaos_support.worker_loop`` (or :func:`forked_main` from a preloaded
forkserver); SIGTERM stops it between batches.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import redis
from sqlalchemy import event

from worker.errors import Unavailable
from worker.queue.redis_queue import Claim, RedisQueue
from worker.runtime.container import build_runtime
from worker.service.consolidate import Pipeline
from worker.settings import load_settings
from worker.store.memory import MemoryStore

STAGES: Final = ("claimed", "read", "merged", "in_commit", "committed", "acked")

#: How long an idle worker waits before sweeping again; the loop's pace, not a synchronisation.
IDLE_POLL_SECONDS: Final = 0.01

logger = logging.getLogger("chaos.worker")

#: Longest a starting worker waits for Redis to answer (it restarts in milliseconds).
REDIS_STARTUP_SECONDS: Final = 30.0

#: Longest a zombie waits for its lease to be taken over before committing anyway.
ZOMBIE_WAIT_SECONDS: Final = 10.0


class Chaos:
    """Decides when this process dies; shared by the wrapped queue and store."""

    def __init__(self, die_at: str | None, die_on: int, zombie: float, seed: int) -> None:
        if die_at is not None and die_at not in STAGES:
            raise SystemExit(f"MEMWORKER_CHAOS_DIE_AT must be one of {STAGES}, got {die_at!r}")
        self.die_at = die_at
        self.remaining = die_on
        self.zombie = zombie
        self.rng = random.Random(seed)
        self.claim: Claim | None = None
        self.zombie_claim: Claim | None = None

    def reached(self, stage: str) -> None:
        if stage != self.die_at:
            return
        self.remaining -= 1
        if self.remaining <= 0:
            os.kill(os.getpid(), signal.SIGKILL)


class ChaosQueue(RedisQueue):
    def __init__(self, base: RedisQueue, chaos: Chaos) -> None:
        super().__init__(base.redis, base.settings)
        self.chaos = chaos

    def read_batch(self, claim: Claim) -> Any:
        self.chaos.claim = claim
        self.chaos.zombie_claim = claim if self.chaos.rng.random() < self.chaos.zombie else None
        batch = super().read_batch(claim)
        self.chaos.reached("read")
        return batch

    def extend(self, claim: Claim, *, now: float | None = None) -> bool:
        if claim == self.chaos.zombie_claim:
            return True  # the heartbeat "succeeds" but never reaches Redis
        return super().extend(claim, now=now)

    def ack(self, claim: Claim, *, now: float | None = None) -> bool:
        acked = super().ack(claim, now=now)
        self.chaos.reached("acked")
        return acked

    def lease_taken_over(self, claim: Claim) -> bool:
        token = self.redis.hget(self.layout.meta(claim.namespace), "token")
        return token is None or int(token) != claim.token


class ChaosStore(MemoryStore):
    def __init__(self, base: MemoryStore, queue: ChaosQueue, chaos: Chaos) -> None:
        super().__init__(base.engine)
        self.queue = queue
        self.chaos = chaos
        self._in_batch_commit = False

        @event.listens_for(self.engine, "commit")
        def _before_commit(_conn: Any) -> None:
            # Fires for every transaction; only a batch commit has a pending claim.
            if self.chaos.claim is not None and self._in_batch_commit:
                self.chaos.reached("in_commit")

    def commit_batch(self, **kwargs: Any) -> Any:
        claim = self.chaos.claim
        self.chaos.reached("merged")
        if claim is not None and claim == self.chaos.zombie_claim:
            deadline = time.monotonic() + ZOMBIE_WAIT_SECONDS
            while not self.queue.lease_taken_over(claim) and time.monotonic() < deadline:
                time.sleep(IDLE_POLL_SECONDS)
        self._in_batch_commit = True
        try:
            result = super().commit_batch(**kwargs)
        finally:
            self._in_batch_commit = False
        self.chaos.reached("committed")
        return result


def _wait_for_redis(client: redis.Redis) -> None:
    """PING until Redis answers: a worker started while Redis restarts waits for it, as a
    supervised worker would be restarted until it comes up."""
    deadline = time.monotonic() + REDIS_STARTUP_SECONDS
    while True:
        try:
            client.ping()
            return
        except redis.RedisError:
            if time.monotonic() > deadline:
                raise
            time.sleep(IDLE_POLL_SECONDS)


def main(argv: Sequence[str] = ()) -> int:
    settings = load_settings()
    state_dir = Path(os.environ["MEMWORKER_CHAOS_STATE_DIR"])
    chaos = Chaos(
        die_at=os.environ.get("MEMWORKER_CHAOS_DIE_AT") or None,
        die_on=int(os.environ.get("MEMWORKER_CHAOS_DIE_ON", "1")),
        zombie=float(os.environ.get("MEMWORKER_CHAOS_ZOMBIE", "0")),
        seed=int(os.environ.get("MEMWORKER_CHAOS_SEED", str(os.getpid()))),
    )
    runtime = build_runtime(settings)
    queue = ChaosQueue(runtime.queue, chaos)
    store = ChaosStore(runtime.store, queue, chaos)
    pipeline = Pipeline(
        queue=queue,
        store=store,
        consolidator=runtime.consolidator,
        settings=settings.for_consolidation,
        sinks=(),
    )
    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    _wait_for_redis(runtime.redis)
    runtime.queue.admin.publish_policy()  # as `memworker worker` does at start
    store.load_state("user:warmup")  # connects to the database before declaring readiness
    pid = os.getpid()
    log_path = state_dir / f"{pid}.log"
    (state_dir / f"{pid}.ready").touch()
    with log_path.open("a", encoding="utf-8") as log:
        while not stopping:
            try:
                claims = queue.claim_due(limit=1)
            except Unavailable as exc:
                logger.warning("sweep failed, sweeping again: %s", exc)
                claims = []
            if not claims:
                time.sleep(IDLE_POLL_SECONDS)
                continue
            for claim in claims:
                chaos.claim = claim
                chaos.reached("claimed")
                try:
                    result = pipeline.consolidate(claim)
                except Unavailable as exc:
                    # Even recording the failure failed: the lease runs out and another
                    # sweep re-claims the batch.
                    logger.warning("consolidation of %s interrupted: %s", claim.namespace, exc)
                    chaos.claim = None
                    continue
                chaos.claim = None
                record = {
                    "namespace": result.namespace,
                    "outcome": result.outcome,
                    "candidates": result.candidates,
                    "zombie": claim == chaos.zombie_claim,
                    "error": result.error,
                }
                log.write(json.dumps(record) + "\n")
                log.flush()
    runtime.close()
    return 0


def forked_main(env: Mapping[str, str], stderr_path: str) -> None:
    """:func:`main` in a process forked from a forkserver: ``env`` replaces the environment
    (it is read as a fresh process would read it) and stderr goes to ``stderr_path``."""
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
