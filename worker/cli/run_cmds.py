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
    concurrency: Annotated[int | None, typer.Option(help="Worker processes.")] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Run a consolidation worker (scale these out; they share Redis and the database)."""
    with cli_errors():
        settings = load_settings()
        args = [f"--loglevel={loglevel}"]
        if concurrency:
            args.append(f"--concurrency={concurrency}")
        _start_worker(settings, args)


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


def _start_worker(settings: Settings, extra: list[str]) -> None:
    from worker.metrics import start_metrics_server
    from worker.tasks.app import create_app
    from worker.tasks.names import CONSOLIDATE_QUEUE, SWEEP_QUEUE

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
