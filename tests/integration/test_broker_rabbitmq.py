"""A separate broker: a real Celery worker on the machine's RabbitMQ (a private vhost per test)
completes batches while the queue stays on Redis, and two deployments sharing one vhost never
take each other's tasks (queue names carry the key prefix)."""

from __future__ import annotations

import time

import pytest
from celery.contrib.testing.worker import start_worker

from tests.support.rabbitmq import rabbitmqctl
from tests.support.waiting import wait_for
from worker.queue.client import MemoryClient
from worker.runtime.celery import LANES, create_app
from worker.runtime.container import build_runtime
from worker.settings import Settings
from worker.types import SWEEP_LANE, SWEEP_TASK, queue_name


@pytest.fixture
def on_rabbitmq(settings: Settings, rabbitmq_vhost: str) -> Settings:
    return settings.model_copy(
        update={
            "broker_url": f"amqp://guest:guest@127.0.0.1:5672/{rabbitmq_vhost}",
            "sinks": ["files"],
        }
    )


def test_a_worker_on_rabbitmq_consolidates_a_batch_queued_in_redis(on_rabbitmq: Settings) -> None:
    runtime = build_runtime(on_rabbitmq)
    app = create_app(on_rabbitmq, runtime=runtime)
    queues = [queue_name(on_rabbitmq.key_prefix, lane) for lane in LANES]
    try:
        with start_worker(
            app,
            pool="threads",
            concurrency=2,
            queues=queues,
            perform_ping_check=False,
            shutdown_timeout=60,
        ):
            with MemoryClient(on_rabbitmq) as client:
                client.enqueue(user_id="u1", trace_id="t1", text="I prefer short answers")
            app.send_task(
                SWEEP_TASK,
                kwargs={"now": time.time() + on_rabbitmq.max_wait_seconds + 1},
                queue=queue_name(on_rabbitmq.key_prefix, SWEEP_LANE),
            )
            files = wait_for(lambda: runtime.store.current_files("user:u1"), "the memory file")
            delivered = on_rabbitmq.effective_files_dir
            wait_for(lambda: list(delivered.rglob("*.md")), "the files sink")
    finally:
        runtime.close()

    assert "short answers" in "".join(files.values())
    assert app.conf.broker_url.startswith("amqp://")


def test_two_deployments_on_one_vhost_never_take_each_others_tasks(
    on_rabbitmq: Settings, rabbitmq_vhost: str
) -> None:
    other = on_rabbitmq.model_copy(update={"key_prefix": on_rabbitmq.key_prefix + "b"})
    mine_runtime, other_runtime = build_runtime(on_rabbitmq), build_runtime(other)
    mine = create_app(on_rabbitmq, runtime=mine_runtime)
    theirs = create_app(other, runtime=other_runtime)
    try:
        with start_worker(
            mine,
            pool="threads",
            concurrency=1,
            queues=[queue_name(on_rabbitmq.key_prefix, lane) for lane in LANES],
            perform_ping_check=False,
            shutdown_timeout=60,
        ):
            theirs.send_task(SWEEP_TASK, queue=queue_name(other.key_prefix, SWEEP_LANE))
            mine.send_task(SWEEP_TASK, queue=queue_name(on_rabbitmq.key_prefix, SWEEP_LANE))
            mine_queue = queue_name(on_rabbitmq.key_prefix, SWEEP_LANE)
            wait_for(
                lambda: messages(rabbitmq_vhost).get(mine_queue) == 0, "my sweep to be consumed"
            )
            waiting = messages(rabbitmq_vhost)
    finally:
        mine_runtime.close()
        other_runtime.close()

    assert waiting[queue_name(other.key_prefix, SWEEP_LANE)] == 1


def messages(vhost: str) -> dict[str, int]:
    """Ready messages per queue of ``vhost``."""
    out = rabbitmqctl("list_queues", "-p", vhost, "name", "messages_ready", "--quiet")
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            found[parts[0]] = int(parts[1])
    return found
