"""The Celery app factory. Settings are built at the edge and passed in.

>>> from worker.settings import Settings
>>> from worker.tasks.app import celery_broker_url
>>> celery_broker_url("unix:///tmp/x/redis.sock")
'redis+socket:///tmp/x/redis.sock'
"""

from __future__ import annotations

from celery import Celery

from worker.errors import ConfigurationError
from worker.queue.address import is_cluster_url
from worker.runtime.container import Runtime, build_runtime
from worker.settings import Settings
from worker.task_names import (
    CONSOLIDATE_LANE,
    CONSOLIDATE_TASK,
    DELIVER_LANE,
    DELIVER_TASK,
    SCHEDULED_RUN_TASK,
    SWEEP_LANE,
    SWEEP_TASK,
    queue_name,
)
from worker.tasks import tasks

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
    beat schedule, its heartbeat) is added by :func:`worker.scheduling.beat.configure_beat`."""
    runtime = runtime or build_runtime(settings)
    sweep_q, consolidate_q, deliver_q = (
        queue_name(settings.key_prefix, lane)
        for lane in (SWEEP_LANE, CONSOLIDATE_LANE, DELIVER_LANE)
    )
    app = Celery("memworker", set_as_current=False)
    app.conf.update(
        broker_url=broker_url(settings, runtime),
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": VISIBILITY_TIMEOUT_SECONDS,
            # Celery's own keys (queues, bindings, unacked) live under the deployment's prefix,
            # so deployments sharing one Redis never consume each other's tasks.
            "global_keyprefix": f"{settings.key_prefix}:celery:",
        },
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
    runtime.request_delivery = lambda: tasks.request_delivery(app)
    tasks.register(app)
    return app


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
