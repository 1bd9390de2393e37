"""Celery tasks: thin shims that fetch the worker's :class:`Runtime` and call plain functions.

The task functions are module-level so every app registers the same callables; each finds its
dependencies on ``self.app`` (set by :func:`worker.tasks.app.create_app`).
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

from celery import Celery, Task

from worker import metrics
from worker.consolidation.pipeline import BatchResult
from worker.queue.redis_queue import Claim
from worker.queue.sweep import consolidation_task_id, sweep_due
from worker.runtime.container import Runtime
from worker.scheduling.actions import run_schedule_tick
from worker.scheduling.beat import parse_tick
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
    runtime: Runtime = app.memworker_runtime
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


def consolidate(self: Task, claim_fields: dict[str, Any]) -> dict[str, Any]:
    """Merge one claimed batch (see :class:`worker.consolidation.pipeline.Pipeline`)."""
    runtime = runtime_of(self.app)
    started = time.perf_counter()
    result = runtime.pipeline.consolidate(Claim(**claim_fields))
    metrics.CONSOLIDATION_SECONDS.observe(time.perf_counter() - started)
    metrics.CONSOLIDATIONS.labels(outcome=result.outcome).inc()
    if result.outcome in ("failed", "dead", "stale"):
        metrics.FAILURES.labels(stage="consolidate").inc()
    metrics.LLM_CALLS.inc(result.llm_calls)
    metrics.LLM_TOKENS.labels(kind="input").inc(result.prompt_tokens)
    metrics.LLM_TOKENS.labels(kind="output").inc(result.completion_tokens)
    if result.outcome == "committed" and runtime.sinks:
        self.app.send_task(DELIVER_TASK, queue=SWEEP_QUEUE)
    return summarise(result)


def sweep(self: Task, now: float | None = None) -> int:
    """Claim due namespaces; one consolidation task per claim, with a deterministic task id.

    ``now`` (epoch seconds) is for tests and catch-up tools; beat sends none.
    """
    runtime = runtime_of(self.app)

    def dispatch(claim: Claim) -> None:
        self.app.send_task(
            CONSOLIDATE_TASK,
            args=(dataclasses.asdict(claim),),
            task_id=consolidation_task_id(claim),
            queue=CONSOLIDATE_QUEUE,
        )

    claims = sweep_due(runtime.queue, dispatch, now=now)
    metrics.CLAIMS.inc(len(claims))
    metrics.refresh_queue_gauges(runtime.queue.stats(now=now).scopes)
    return len(claims)


def deliver_outbox(self: Task) -> int:
    """Publish committed versions that some sink has not taken yet."""
    runtime = runtime_of(self.app)
    if not runtime.sinks:
        return 0
    report = deliver_due(runtime.store, runtime.sinks, now=datetime.now(UTC))
    return report.delivered


def scheduled_run(self: Task, schedule: str, tick: str) -> str:
    """Run one fire of a schedule; ``tick`` is the cron tick beat fired for (ISO, UTC)."""
    runtime = runtime_of(self.app)
    outcome = run_schedule_tick(runtime, schedule, parse_tick(tick), now=datetime.now(UTC))
    return outcome.status


def register(app: Celery) -> None:
    """Register memworker's tasks on ``app``."""
    app.task(name=CONSOLIDATE_TASK, bind=True, ignore_result=True)(consolidate)
    app.task(name=SWEEP_TASK, bind=True, ignore_result=True)(sweep)
    app.task(name=DELIVER_TASK, bind=True, ignore_result=True)(deliver_outbox)
    app.task(
        name=SCHEDULED_RUN_TASK,
        bind=True,
        ignore_result=True,
        autoretry_for=(Exception,),
        retry_backoff=True,
        max_retries=SCHEDULED_RUN_MAX_RETRIES,
    )(scheduled_run)
