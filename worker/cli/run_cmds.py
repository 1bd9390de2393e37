"""``memworker run`` (everything in one process, zero setup), ``worker`` and ``beat``."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from worker.cli.errors import cli_errors
from worker.settings import Settings, load_settings

console = Console(highlight=False)

#: Threads, not processes, for the embedded mode: one process owns the private Redis server and
#: the SQLite file, and two threads let a sweep run while a merge waits on a model.
EMBEDDED_CONCURRENCY = 2


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("worker")(worker)
    app.command("beat")(beat)


def run(
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the embedded Redis, SQLite and files live.")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run worker and beat in one process; with no MEMWORKER_REDIS_URL, on an embedded Redis."""
    from worker.runtime.embedded_redis import embedded_redis

    with cli_errors():
        overrides: dict[str, object] = {"data_dir": data_dir} if data_dir else {}
        settings = load_settings(**overrides)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            if settings.redis_url is None:
                url = stack.enter_context(embedded_redis(settings.data_dir))
                redis_note = f"embedded Redis on {url}"
            else:
                redis_note = f"Redis at {_redact(settings.redis_url)}"
            _prepare_store(settings)
            _bind_beat_to_this_process()
            _print_banner(settings, redis_note)
            _start_worker(
                settings,
                [
                    "--beat",
                    f"--schedule={settings.data_dir / 'celerybeat-schedule'}",
                    "--pool=threads",
                    f"--concurrency={EMBEDDED_CONCURRENCY}",
                    f"--loglevel={loglevel}",
                ],
            )


def worker(
    concurrency: Annotated[int, typer.Option(help="Merges run at once in this worker.")] = 4,
    pool: Annotated[str, typer.Option(help="Celery pool: threads, prefork or solo.")] = "threads",
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run a consolidation worker (scale these out; they share Redis and the database).

    Threads by default: merges wait on the database and the model, not the CPU, and one
    process keeps the Prometheus metrics in one place.
    """
    with cli_errors():
        settings = load_settings()
        _start_worker(
            settings, [f"--loglevel={loglevel}", f"--pool={pool}", f"--concurrency={concurrency}"]
        )


def beat(
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run the scheduler. Run exactly one per deployment (tasks are idempotent anyway)."""
    from worker.tasks.app import create_app

    with cli_errors():
        settings = load_settings()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        app = create_app(settings)
        app.start(
            [
                "beat",
                f"--loglevel={loglevel}",
                f"--schedule={settings.data_dir / 'celerybeat-schedule'}",
            ]
        )


def _bind_beat_to_this_process() -> None:
    """The embedded beat runs in a child process; make it die with us, even on SIGKILL, so an
    orphaned scheduler never keeps firing at a Redis that is gone."""
    import os
    import signal

    from celery.signals import beat_init

    from worker.runtime.lifetime import die_with_parent

    parent = os.getpid()

    def bind(**_: object) -> None:
        die_with_parent(signal.SIGTERM, parent=parent)

    beat_init.connect(bind, weak=False)


def _prepare_store(settings: Settings) -> None:
    """Migrate the embedded SQLite store now, so every command can read it from the start."""
    from worker.store.memory import MemoryStore

    if settings.database_url is None:
        MemoryStore.from_url(settings.effective_database_url, create=True).dispose()


def _start_worker(settings: Settings, extra: list[str]) -> None:
    from worker.metrics import start_metrics_server
    from worker.runtime.container import build_runtime
    from worker.service.startup import prepare_queue
    from worker.tasks.app import create_app
    from worker.tasks.names import CONSOLIDATE_QUEUE, SWEEP_QUEUE

    runtime = build_runtime(settings)
    try:
        prepare_queue(runtime.queue)  # refuses an evicting Redis; publishes the queue policy
    finally:
        runtime.close()
    app = create_app(settings)
    if settings.metrics_port:
        start_metrics_server(settings.metrics_port)
    app.worker_main(["worker", f"--queues={SWEEP_QUEUE},{CONSOLIDATE_QUEUE}", *extra])


def _print_banner(settings: Settings, redis_note: str) -> None:
    console.print("[bold]memworker[/bold] is running (Ctrl-C stops it)")
    console.print(f"  queue:    {redis_note}")
    console.print(f"  memory:   {_redact(settings.effective_database_url)}")
    console.print(f"  data dir: {settings.data_dir}")
    console.print('  enqueue:  memworker enqueue --user u1 "I prefer short answers"')
    console.print("  inspect:  memworker status; memworker show --user u1")


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.rsplit("@", maxsplit=1)[-1]
