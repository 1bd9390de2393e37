"""Celery tasks: thin shims that fetch the worker's :class:`Runtime` and call a use case.

The task functions are module-level so every app registers the same callables; each finds its
dependencies on ``self.app`` (set by :func:`worker.tasks.app.create_app`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from celery import Celery, Task

from worker.queue.redis_queue import Claim
from worker.runtime.container import Runtime
from worker.runtime.parts import scan_parts
from worker.service.publish import deliver_due
from worker.service.sweep import sweep as sweep_due_namespaces
from worker.service.tick import run_schedule_tick
from worker.task_names import (
    CONSOLIDATE_LANE,
    CONSOLIDATE_TASK,
    DELIVER_LANE,
    DELIVER_TASK,
    SCHEDULED_RUN_TASK,
    SWEEP_TASK,
    queue_name,
)

#: A scheduled run that fails (a source down, the database busy) is retried by Celery with
#: exponential backoff up to this many times; the tick stays unfinished and the watermark does
#: not move, so the next tick's window still covers it.
SCHEDULED_RUN_MAX_RETRIES = 5

#: A delivery request left unconsumed this long is dropped (see :func:`request_delivery`).
DELIVERY_REQUEST_EXPIRES_SECONDS = 30.0


def runtime_of(app: Celery) -> Runtime:
    runtime: Runtime = app.memworker_runtime
    return runtime


def consolidation_task_id(claim: Claim) -> str:
    """Deterministic: a re-sent dispatch of the same claim is the same Celery task."""
    return f"memworker.consolidate:{claim.namespace}:{claim.token}"


def consolidate(self: Task, claim_fields: dict[str, Any]) -> dict[str, object]:
    """Merge one claimed batch (see :mod:`worker.service.consolidate`)."""
    return runtime_of(self.app).pipeline.consolidate(Claim(**claim_fields)).summary()


def sweep(self: Task, now: float | None = None) -> int:
    """Claim due namespaces; one consolidation task per claim, with a deterministic task id.

    ``now`` (epoch seconds) is for tests and catch-up tools; beat sends none.
    """

    def dispatch(claim: Claim) -> None:
        self.app.send_task(
            CONSOLIDATE_TASK,
            args=(dataclasses.asdict(claim),),
            task_id=consolidation_task_id(claim),
            queue=queue_name(runtime_of(self.app).settings.key_prefix, CONSOLIDATE_LANE),
        )

    runtime = runtime_of(self.app)
    claimed = sweep_due_namespaces(runtime.queue, dispatch, now=now, gauges=runtime.gauge_schedule)
    return len(claimed)


def deliver_outbox(self: Task) -> int:
    """Publish committed versions that some sink has not taken yet."""
    runtime = runtime_of(self.app)
    # No `now`: claims, retries and the breaker run on the database's clock, not this host's.
    report = deliver_due(runtime.store, runtime.sinks, gate=runtime.sink_gate)
    return report.delivered


def scheduled_run(self: Task, schedule: str, tick: str) -> str:
    """Run one fire of a schedule; ``tick`` is the cron tick beat fired for (ISO, UTC)."""
    runtime = runtime_of(self.app)
    # The database's clock: a tick claim's staleness is compared by every beat host.
    now = runtime.store.db_now()
    outcome = run_schedule_tick(
        runtime, schedule, tick, open_scan=lambda: scan_parts(runtime.settings), now=now
    )
    return outcome.status


def request_delivery(app: Celery) -> None:
    """Ask for a delivery pass on the deliver lane (after a commit).

    The message expires quickly: if the lane is busy (a slow sink), the passes already queued
    and beat's periodic pass cover this commit too, so requests do not pile up.
    """
    queue = queue_name(runtime_of(app).settings.key_prefix, DELIVER_LANE)
    app.send_task(DELIVER_TASK, queue=queue, expires=DELIVERY_REQUEST_EXPIRES_SECONDS)


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
