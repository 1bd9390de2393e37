"""A real in-process Celery worker on real Redis runs sweeps, merges and scheduled runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from celery import Celery
from celery.contrib.testing.worker import start_worker

from worker.queue.client import MemoryClient
from worker.runtime.celery import LANES, create_app
from worker.runtime.container import Runtime, build_runtime
from worker.settings import Settings
from worker.types import SCHEDULED_RUN_TASK, SWEEP_LANE, SWEEP_TASK, queue_name

#: Each test runs on a single Redis and on a Redis Cluster.
pytestmark = pytest.mark.cluster

#: Upper bound on how long the worker may take to finish what a test sent it. Polling stops as
#: soon as the outcome is there; this only turns a hang into a failure.
WAIT_SECONDS = 30.0


def wait_for(predicate, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def worker_settings(settings: Settings, tmp_path: Path) -> Settings:
    schedules = tmp_path / "schedules"
    schedules.mkdir()
    (schedules / "test.toml").write_text(
        '[[schedule]]\nname = "every-six-hours"\ncron = "0 */6 * * *"\n'
        'action = "consolidate_pending"\n'
    )
    return settings.model_copy(update={"schedules_dir": schedules, "sinks": ["files"]})


@pytest.fixture
def runtime(worker_settings: Settings) -> Iterator[Runtime]:
    rt = build_runtime(worker_settings)
    yield rt
    rt.close()


@pytest.fixture
def celery_app(worker_settings: Settings, runtime: Runtime) -> Iterator[Celery]:
    app = create_app(worker_settings, runtime=runtime)
    with start_worker(
        app,
        pool="threads",
        concurrency=2,
        perform_ping_check=False,
        queues=[queue_name(worker_settings.key_prefix, lane) for lane in LANES],
        shutdown_timeout=30,
    ):
        yield app


def test_enqueued_candidate_becomes_a_memory_file_after_the_quiet_period(
    worker_settings: Settings, runtime: Runtime, celery_app: Celery
) -> None:
    now = time.time()
    with MemoryClient(worker_settings) as client:
        client.enqueue(user_id="u1", trace_id="t1", text="I prefer short answers")
    celery_app.send_task(
        SWEEP_TASK,
        kwargs={"now": now + worker_settings.debounce_seconds + 1},
        queue=queue_name(worker_settings.key_prefix, SWEEP_LANE),
    )
    files = wait_for(lambda: runtime.store.current_files("user:u1"), "the memory file")
    assert "short answers" in "".join(files.values())
    delivered = worker_settings.effective_files_dir
    wait_for(lambda: list(delivered.rglob("*.md")), "the files sink")


def test_scheduled_run_with_an_injected_tick_is_idempotent_when_fired_twice(
    runtime: Runtime, celery_app: Celery
) -> None:
    tick = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    for _ in range(2):
        celery_app.send_task(
            SCHEDULED_RUN_TASK,
            args=("every-six-hours", tick.isoformat()),
            queue=queue_name(runtime.settings.key_prefix, SWEEP_LANE),
        )
    # The row appears when the first fire starts; the watermark moves when it finishes.
    wait_for(lambda: runtime.store.watermark("every-six-hours"), "the finished tick")
    ticks = runtime.store.last_ticks("every-six-hours")
    assert [(t.tick, t.status) for t in ticks] == [(tick, "ok")]
    assert runtime.store.watermark("every-six-hours") == tick
