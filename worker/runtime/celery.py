"""Celery: the app, its lanes, and the thin tasks that call a use case.

Each lane is one Celery queue, consumed by its own process and pool, so a dependency that hangs
slows only its own lane: a hung sink holds the *deliver* lane, a slow model the *consolidate*
lane, while the *sweep* lane keeps claiming due namespaces. ``memworker worker`` runs all three
lanes (one child process each); ``--lanes`` picks some, so each can be scaled on its own.

>>> [lane.name for lane in LANES.values()]
['sweep', 'consolidate', 'deliver']
>>> celery_argv(LANES["deliver"], key_prefix="mw", concurrency=2, loglevel="INFO")[:3]
['worker', '--queues=mw.deliver', '--pool=threads']

The task functions are module-level shims, so every app registers the same callables; each
finds the worker's :class:`~worker.runtime.container.Runtime` on ``self.app`` (set by
:func:`create_app`) and calls a use case. Settings are built at the edge and passed in.

>>> from worker.settings import Settings
>>> from worker.runtime.celery import celery_broker_url
>>> celery_broker_url("unix:///tmp/x/redis.sock")
'redis+socket:///tmp/x/redis.sock'
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Final

from celery import Celery, Task

from worker.errors import ConfigurationError, InvalidOption
from worker.queue.redis import is_cluster_url
from worker.queue.redis_queue import Claim
from worker.runtime.container import (
    WORKER_SOCKET_TIMEOUT_SECONDS,
    Runtime,
    build_runtime,
    scan_parts,
)
from worker.service.publish import deliver_due
from worker.service.sweep import sweep as sweep_due_namespaces
from worker.service.tick import run_schedule_tick
from worker.settings import Settings
from worker.types import (
    CONSOLIDATE_LANE,
    CONSOLIDATE_TASK,
    DELIVER_LANE,
    DELIVER_TASK,
    SCHEDULED_RUN_TASK,
    SWEEP_LANE,
    SWEEP_TASK,
    queue_name,
)


@dataclass(frozen=True)
class Lane:
    """One lane: its name, how many tasks it runs at once by default, and what it is for.
    Its Celery queue is :func:`~worker.types.queue_name` of the deployment's prefix."""

    name: str
    default_concurrency: int
    purpose: str


#: Every lane, in start order. Defaults: two sweep threads, so a scheduled run that waits on a
#: source never delays the next sweep; four merges (they wait on SQL and the model, not the
#: CPU); two deliverers (deliveries are claimed, so more deliverers never double one).
LANES: Final[dict[str, Lane]] = {
    SWEEP_LANE: Lane(SWEEP_LANE, 2, "claims due namespaces; runs scheduled ticks"),
    CONSOLIDATE_LANE: Lane(CONSOLIDATE_LANE, 4, "merges claimed batches"),
    DELIVER_LANE: Lane(DELIVER_LANE, 2, "publishes committed versions to sinks"),
}


def parse_lanes(value: str) -> list[Lane]:
    """``all`` or a comma-separated list of lane names.

    >>> [lane.name for lane in parse_lanes("deliver,sweep")]
    ['sweep', 'deliver']
    """
    names = [part.strip() for part in value.split(",") if part.strip()]
    if names == ["all"]:
        return list(LANES.values())
    unknown = [n for n in names if n not in LANES]
    if unknown or not names:
        raise InvalidOption(
            f"--lanes {value!r}: unknown lane(s) {unknown or [value]}; "
            f"use 'all' or a comma-separated list of {', '.join(LANES)}"
        )
    return [lane for name, lane in LANES.items() if name in names]


def celery_argv(
    lane: Lane, *, key_prefix: str, concurrency: int, loglevel: str, pool: str = "threads"
) -> list[str]:
    """Arguments of ``app.worker_main`` that run ``lane`` alone, under a node name of its own."""
    return [
        "worker",
        f"--queues={queue_name(key_prefix, lane.name)}",
        f"--pool={pool}",
        f"--concurrency={concurrency}",
        f"--loglevel={loglevel}",
        # Unique per process, so several lanes (and several workers) on one host never share a
        # Celery node name.
        f"--hostname={lane.name}.{os.getpid()}@%h",
        # Task events, so Flower (and `celery events`) can follow each lane.
        "--task-events",
        # No worker-to-worker chatter: mingle (revoked-task sync at start, a second of
        # waiting) and gossip (peer events) serve features memworker does not use, and
        # gossip's restart after a broker outage fails with a traceback in Celery 5.
        "--without-mingle",
        "--without-gossip",
    ]


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


#: Long enough for a typical merge to finish and commit, short enough that Ctrl-C feels prompt.
SOFT_SHUTDOWN_SECONDS = 10.0

#: Broker visibility timeout. Only matters for messages a dead worker had reserved; recovery of
#: the batch itself is the Redis lease expiring, so this need not cover a long merge.
VISIBILITY_TIMEOUT_SECONDS = 3600


def celery_broker_url(redis_url: str) -> str:
    """kombu spells a Redis Unix socket ``redis+socket://``; redis-py spells it ``unix://``."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


def create_app(settings: Settings, *, runtime: Runtime | None = None) -> Celery:
    """A Celery app bound to ``settings``: tasks, queues and routes. The scheduler's part (the
    beat schedule, its heartbeat) is added by :func:`worker.runtime.beat.configure_beat`."""
    runtime = runtime or build_runtime(settings)
    sweep_q, consolidate_q, deliver_q = (
        queue_name(settings.key_prefix, lane)
        for lane in (SWEEP_LANE, CONSOLIDATE_LANE, DELIVER_LANE)
    )
    app = Celery("memworker", set_as_current=False)
    broker = broker_url(settings, runtime)
    app.conf.update(
        broker_url=broker,
        broker_connection_retry_on_startup=True,
        broker_transport_options=broker_options(broker, settings.key_prefix),
        task_ignore_result=True,
        timezone="UTC",
        enable_utc=True,
        # One message at a time per process: a claimed batch never waits behind another
        # worker's long merge in a prefetch buffer.
        worker_prefetch_multiplier=1,
        task_acks_late=False,
        # On shutdown, merges in flight get this long to commit; past it they are cut off and
        # their leases expire (the batch is retried), so correctness never depends on it.
        worker_soft_shutdown_timeout=SOFT_SHUTDOWN_SECONDS,
        task_default_queue=consolidate_q,
        task_routes={
            SWEEP_TASK: {"queue": sweep_q},
            SCHEDULED_RUN_TASK: {"queue": sweep_q},
            DELIVER_TASK: {"queue": deliver_q},
            CONSOLIDATE_TASK: {"queue": consolidate_q},
        },
        worker_hijack_root_logger=False,
        # Celery 6's default, set now: it only concerns acks_late tasks (memworker has none),
        # and leaving it unset prints a deprecation warning at every broker reconnect.
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    app.memworker_runtime = runtime
    runtime.request_delivery = lambda: request_delivery(app)
    register(app)
    return app


#: The URL schemes of kombu's Redis transport (a Unix socket is ``redis+socket://``).
REDIS_BROKER_SCHEMES: Final = ("redis://", "rediss://", "redis+socket://")


def broker_options(broker: str, key_prefix: str) -> dict[str, Any]:
    """Celery's broker transport options for ``broker``.

    On a Redis broker every socket call has a deadline: kombu's default waits forever, so a
    Redis that accepts connections and never answers would hold a lane's main loop, and even
    its Ctrl-C, for good. A timed-out call is a lost connection to Celery, which reconnects.
    RabbitMQ has heartbeats of its own.

    >>> broker_options("redis://r:6379/0", "mw")["socket_timeout"]
    5.0
    >>> "socket_timeout" in broker_options("amqp://mq:5672/mw", "mw")
    False
    """
    options: dict[str, Any] = {
        "visibility_timeout": VISIBILITY_TIMEOUT_SECONDS,
        # Celery's own keys (queues, bindings, unacked) live under the deployment's prefix,
        # so deployments sharing one Redis never consume each other's tasks.
        "global_keyprefix": f"{key_prefix}:celery:",
    }
    if broker.startswith(REDIS_BROKER_SCHEMES):
        options["socket_timeout"] = WORKER_SOCKET_TIMEOUT_SECONDS
        options["socket_connect_timeout"] = WORKER_SOCKET_TIMEOUT_SECONDS
    return options


def broker_url(settings: Settings, runtime: Runtime) -> str:
    """``MEMWORKER_BROKER_URL``, else the queue's Redis (resolved only when needed: an
    embedded server may not be running yet for a command that only reads SQL)."""
    if settings.broker_url:
        return settings.broker_url
    if is_cluster_url(settings.redis_url):
        # Celery's Redis transport keeps a task queue in keys of different slots, which a
        # cluster refuses (CROSSSLOT), so a clustered queue needs a broker of its own.
        raise ConfigurationError(
            "the queue's Redis is a cluster (MEMWORKER_REDIS_URL is redis+cluster://…), which "
            "cannot be Celery's broker; set MEMWORKER_BROKER_URL, e.g. "
            "amqp://user:pass@rabbitmq:5672/memworker or a single-node redis:// URL"
        )
    return celery_broker_url(runtime.redis_url)
