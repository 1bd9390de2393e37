"""Celery tasks: thin shims that fetch the worker's :class:`Runtime` and call plain functions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from celery import Celery, Task

from worker.consolidation.pipeline import BatchResult
from worker.queue.redis_queue import Claim
from worker.queue.sweep import consolidation_task_id, sweep_due
from worker.runtime.container import Runtime
from worker.scheduling.actions import run_schedule_tick
from worker.sinks.delivery import deliver_due
from worker.tasks.names import (
    CONSOLIDATE_QUEUE,
    CONSOLIDATE_TASK,
    DELIVER_TASK,
    SCHEDULED_RUN_TASK,
    SWEEP_QUEUE,
    SWEEP_TASK,
)

#: A scheduled run that fails (a source down, the database busy) is retried by Celery with
#: exponential backoff up to this many times; the tick stays unfinished and the watermark does
#: not move, so the next tick's window still covers it.
SCHEDULED_RUN_MAX_RETRIES = 5


def runtime_of(app: Celery) -> Runtime:
    runtime: Runtime = app.memworker_runtime  # type: ignore[attr-defined]
    return runtime


def summarise(result: BatchResult) -> dict[str, Any]:
    return {
        "namespace": result.namespace,
        "outcome": result.outcome,
        "candidates": result.candidates,
        "skipped": result.skipped,
        "version": result.version,
        "counts": result.counts,
        "files": [change.path for change in result.files],
        "error": result.error,
    }


def register(app: Celery) -> None:
    """Define memworker's tasks on ``app``."""

    @app.task(name=CONSOLIDATE_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def consolidate(
        self: Task, namespace: str, token: int, covered: str, count: int, attempts: int
    ) -> dict[str, Any]:
        runtime = runtime_of(self.app)
        claim = Claim(
            namespace=namespace, token=token, covered=covered, count=count, attempts=attempts
        )
        result = runtime.pipeline.consolidate(claim)
        if result.outcome == "committed" and runtime.sinks:
            self.app.send_task(DELIVER_TASK, queue=SWEEP_QUEUE)
        return summarise(result)

    @app.task(name=SWEEP_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def sweep(self: Task, now: float | None = None) -> int:
        """``now`` (epoch seconds) is for tests and catch-up tools; beat sends none."""
        runtime = runtime_of(self.app)

        def dispatch(claim: Claim) -> None:
            consolidate.apply_async(
                args=(claim.namespace, claim.token, claim.covered, claim.count, claim.attempts),
                task_id=consolidation_task_id(claim),
                queue=CONSOLIDATE_QUEUE,
            )

        return len(sweep_due(runtime.queue, dispatch, now=now))

    @app.task(name=DELIVER_TASK, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def deliver_outbox(self: Task) -> int:
        runtime = runtime_of(self.app)
        if not runtime.sinks:
            return 0
        return deliver_due(runtime.store, runtime.sinks, now=datetime.now(UTC)).delivered

    @app.task(  # type: ignore[untyped-decorator]
        name=SCHEDULED_RUN_TASK,
        bind=True,
        ignore_result=True,
        autoretry_for=(Exception,),
        retry_backoff=True,
        max_retries=SCHEDULED_RUN_MAX_RETRIES,
    )
    def scheduled_run(self: Task, schedule: str, tick: str) -> str:
        runtime = runtime_of(self.app)
        outcome = run_schedule_tick(
            runtime, schedule, datetime.fromisoformat(tick), now=datetime.now(UTC)
        )
        return str(outcome)
