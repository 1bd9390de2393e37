"""Running memworker: ``run``, ``worker`` and ``beat``; ``db`` and ``schedules``.

``memworker run`` (everything on one machine, zero setup), ``worker`` and ``beat``.

``worker`` runs the three lanes (:mod:`worker.runtime.celery`) as one child process each, so a
hung sink or a slow model only ever holds its own lane; ``--lanes`` runs some of them, to scale
each on its own. ``run`` does the same plus beat, on an embedded Redis when none is configured.
Both check the database schema and the queue's Redis before any process takes work.

``memworker db``: migrate the memory store and show its schema revision.

>>> import typer
>>> app = typer.Typer()
>>> register_db(app)
>>> [g.name for g in app.registered_groups]
['db']

``memworker schedules``: what beat will fire, when, and over which window.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from rich.console import Console

from worker.cli.common import cli_errors, make_console, print_json

if TYPE_CHECKING:
    from worker.runtime.processes import Child, StopSignals
    from worker.service.schedules import ScheduleSpec
    from worker.settings import Settings


console = Console(highlight=False)
log = logging.getLogger(__name__)

#: Embedded mode's lanes: two merges (SQLite has one writer; two let one merge wait on a model
#: while the other commits), one sweep, and two deliverers, so a hung sink holds one of them
#: and the other keeps publishing to the healthy sinks.
EMBEDDED_CONCURRENCY: Final = {"sweep": 1, "consolidate": 2, "deliver": 2}

SupervisedOpt = Annotated[
    bool,
    typer.Option("--supervised", hidden=True, help="Started by `worker`/`run` (internal)."),
]
LoglevelOpt = Annotated[str, typer.Option(help="Log level: DEBUG, INFO, WARNING, ERROR.")]


def register_run(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("worker")(worker)
    app.command("beat")(beat)


def run(
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the embedded Redis, SQLite and files live.")
    ] = None,
    loglevel: LoglevelOpt = "INFO",
) -> None:
    """Run worker lanes and beat together; with no MEMWORKER_REDIS_URL, on an embedded Redis."""
    from worker.runtime.celery import LANES
    from worker.runtime.processes import Child, StopSignals, embedded_redis, redacted_url
    from worker.settings import load_settings

    # Caught first: a Ctrl-C during start-up must stop it, not be lost in a library's handler.
    with StopSignals() as signals, cli_errors():
        overrides: dict[str, object] = {"data_dir": data_dir} if data_dir else {}
        settings = load_settings(**overrides)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            env = dict(os.environ) | {"MEMWORKER_DATA_DIR": str(settings.data_dir)}
            if settings.redis_url is None:
                url = stack.enter_context(embedded_redis(settings.data_dir))
                env["MEMWORKER_REDIS_URL"] = url
                settings = settings.model_copy(update={"redis_url": url})
                redis_note = f"embedded Redis on {url}"
            else:
                redis_note = f"Redis at {redacted_url(settings.redis_url)}"
            _prepare(settings, model=True)
            _print_summary(settings, EMBEDDED_CONCURRENCY, redis_note, beat=True)
            console.print('  try:      memworker enqueue --user u1 "I prefer short answers"')
            beat_argv = [*_memworker(), "beat", f"--loglevel={loglevel}", "--supervised"]
            status = _supervise_lanes(
                settings,
                list(LANES),
                EMBEDDED_CONCURRENCY,
                loglevel,
                env,
                extra=[Child("beat", beat_argv, env)],
                signals=signals,
            )
            raise typer.Exit(status)


def worker(
    lanes: Annotated[
        str, typer.Option(help="Lanes to run: all, or some of sweep,consolidate,deliver.")
    ] = "all",
    concurrency: Annotated[int, typer.Option(min=1, help="Merges run at once.")] = 4,
    sweep_concurrency: Annotated[int, typer.Option(min=1, help="Sweep lane threads.")] = 2,
    deliver_concurrency: Annotated[int, typer.Option(min=1, help="Deliveries at once.")] = 2,
    pool: Annotated[str, typer.Option(help="Celery pool: threads, prefork or solo.")] = "threads",
    loglevel: LoglevelOpt = "INFO",
    supervised: SupervisedOpt = False,
) -> None:
    """Run consolidation workers: one process per lane; scale out on one Redis and database.

    Threads by default: merges wait on the database and the model, not the CPU.
    """
    from worker.runtime.celery import parse_lanes
    from worker.runtime.processes import StopSignals
    from worker.settings import load_settings

    counts = {"sweep": sweep_concurrency, "consolidate": concurrency}
    counts["deliver"] = deliver_concurrency
    with cli_errors():
        chosen = parse_lanes(lanes)
        if len(chosen) == 1:  # Celery's own process, with Celery's own signal handling
            lane = chosen[0].name
            _run_lane(load_settings(), lane, counts[lane], pool, loglevel, supervised)
            return
    # Caught first: a Ctrl-C during start-up must stop it, not be lost in a library's handler.
    with StopSignals() as signals, cli_errors():
        settings = load_settings()
        _prepare(settings, model=True)
        names = [c.name for c in chosen]
        shown = {name: counts[name] for name in names}
        _print_summary(settings, shown, f"Redis at {_redis_of(settings)}", pool=pool)
        env = dict(os.environ)
        raise typer.Exit(_supervise_lanes(settings, names, counts, loglevel, env, signals=signals))


def beat(loglevel: LoglevelOpt = "INFO", supervised: SupervisedOpt = False) -> None:
    """Run the scheduler; of several, the one holding the beat lock schedules, the others wait.

    Run one or more: only the one holding the beat lock in Redis schedules; the others stand
    by and take over when it stops."""
    from worker.queue.deployment import BeatLock
    from worker.runtime.beat import (
        BEAT_LOCK_CONF_KEY,
        BEAT_REDIS_WATCHED_CONF_KEY,
        BEAT_STOP_CONF_KEY,
        configure_beat,
    )
    from worker.runtime.celery import create_app
    from worker.runtime.processes import STOP_DEADLINE_SECONDS, quiet_celery, supervisor_pid
    from worker.settings import load_settings

    with cli_errors():
        settings = load_settings()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        if not supervised:
            _prepare(settings)
        quiet_celery(loglevel)
        app = create_app(settings)
        configure_beat(app, settings)
        runtime = app.memworker_runtime
        app.conf[BEAT_LOCK_CONF_KEY] = BeatLock(
            runtime.redis, settings.key_prefix, ttl_seconds=settings.beat_lock_seconds
        )
        # A supervisor that watches Redis names its outages; a beat nobody watches says them.
        app.conf[BEAT_REDIS_WATCHED_CONF_KEY] = supervised and supervisor_pid() is not None
        app.conf[BEAT_STOP_CONF_KEY] = STOP_DEADLINE_SECONDS
        app.start(
            [
                "--quiet",  # no banner: the summary of `run` / the log line below say it
                "beat",
                f"--loglevel={loglevel}",
                f"--schedule={settings.data_dir / 'celerybeat-schedule'}",
            ]
        )


def _run_lane(
    settings: Settings, lane_name: str, concurrency: int, pool: str, loglevel: str, supervised: bool
) -> None:
    """Run one lane in this process (a supervisor's child, or a deployment that scales lanes
    as separate containers)."""
    from celery.signals import worker_ready, worker_shutting_down

    from worker.metrics import start_metrics_server
    from worker.runtime.beat import configure_beat
    from worker.runtime.celery import LANES, celery_argv, create_app
    from worker.runtime.container import install_outage_filter
    from worker.runtime.processes import quiet_celery, stop_within
    from worker.service.sweep import prepare_merges
    from worker.types import CONSOLIDATE_LANE

    if not supervised:
        _prepare(settings, model=True)
        lanes = {lane_name: concurrency}
        _print_summary(settings, lanes, f"Redis at {_redis_of(settings)}", pool=pool)
    quiet_celery(loglevel)
    app = create_app(settings)
    configure_beat(app, settings)  # as beat sees it: a lane refuses a broken schedule too
    if lane_name == CONSOLIDATE_LANE:
        prepare_merges()  # before the pool starts: prefork children inherit what it built
    if settings.metrics_port and not supervised:
        start_metrics_server(settings.metrics_port)
    lane = LANES[lane_name]
    argv = celery_argv(
        lane,
        key_prefix=settings.key_prefix,
        concurrency=concurrency,
        loglevel=loglevel,
        pool=pool,
    )

    install_outage_filter(report=not supervised)  # under a supervisor, it speaks for Redis

    def ready(**_: object) -> None:
        log.info("%s lane ready (×%d, %s pool): %s", lane_name, concurrency, pool, lane.purpose)

    worker_ready.connect(ready, weak=False)
    # However Celery's own shutdown fares against a broker that never answers, a stop ends.
    worker_shutting_down.connect(lambda **_: stop_within(), weak=False)
    app.worker_main(["--quiet", *argv])  # no banner: the summary said what runs


def _supervise_lanes(
    settings: Settings,
    names: list[str],
    counts: dict[str, int],
    loglevel: str,
    env: dict[str, str],
    *,
    extra: list[Child] | None = None,
    signals: StopSignals | None = None,
) -> int:
    """One child per lane (plus ``extra``); their metrics are collected in one folder and
    served from here."""
    from worker.queue.redis import resolve_redis_url
    from worker.runtime.container import RedisWatch
    from worker.runtime.processes import supervise

    folder = settings.data_dir / f"metrics.{os.getpid()}"
    # One voice for the Redis all children share: they say nothing of it (supervised).
    watch = RedisWatch(resolve_redis_url(settings), _say)
    try:
        on_exit = _serve_lane_metrics(settings, env, folder)
        children = [_lane_child(name, counts[name], loglevel, env) for name in names]
        everything = [*children, *(extra or [])]
        return supervise(everything, on_exit=on_exit, on_poll=watch, signals=signals)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the lanes' metric files die with them


def _serve_lane_metrics(
    settings: Settings, env: dict[str, str], folder: Path
) -> Callable[[int], None]:
    """Prometheus multiprocess mode: children write to ``folder``, this process serves the
    sum. Returns the hook that marks a reaped child dead (its live gauges go away)."""
    if not settings.metrics_port:
        return lambda _pid: None
    from prometheus_client import CollectorRegistry, multiprocess

    from worker.metrics import start_metrics_server

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(folder))  # type: ignore[no-untyped-call]
    start_metrics_server(settings.metrics_port, registry)
    mark_dead = multiprocess.mark_process_dead
    return lambda pid: mark_dead(pid, path=str(folder))  # type: ignore[no-untyped-call]


def _lane_child(name: str, concurrency: int, loglevel: str, env: dict[str, str]) -> Child:
    from worker.runtime.processes import Child

    argv = [*_memworker(), "worker", f"--lanes={name}", f"--loglevel={loglevel}", "--supervised"]
    option = {"sweep": "--sweep-concurrency", "deliver": "--deliver-concurrency"}
    argv.append(f"{option.get(name, '--concurrency')}={concurrency}")
    return Child(f"{name} lane", argv, env)


def _memworker() -> list[str]:
    """This interpreter running the ``memworker`` command, whatever the PATH says."""
    return [sys.executable, "-m", "worker"]


def _prepare(settings: Settings, *, model: bool = False) -> None:
    """Before any process takes work: the schema is this release's (SQLite is migrated in
    place; a server database must be migrated by `memworker db upgrade`), the queue's Redis
    keeps what it is given (durability check, then the deployment's policy), and, for the
    workers (``model``), the consolidator and its model build and the model server answers."""
    from worker.runtime.container import build_runtime
    from worker.service.sweep import prepare_queue, probe_model_server
    from worker.store.memory import MemoryStore

    if model:  # first: a configuration mistake is named before any service is touched
        build_runtime(settings).consolidator  # noqa: B018 - building it is the check
        probe_model_server(settings.for_consolidation)
    if settings.database_url is None:
        MemoryStore.from_url(settings.effective_database_url, create=True).dispose()
    runtime = build_runtime(settings)
    try:
        runtime.store  # noqa: B018 - opening it checks the schema (SchemaOutOfDate)
        # Refuses an evicting Redis; publishes the queue policy and (workers only: beat
        # publishes nothing) the sinks the workers publish to.
        prepare_queue(runtime.queue.admin, sinks=settings.sinks if model else None)
    finally:
        runtime.close()


def _print_summary(
    settings: Settings,
    lanes: dict[str, int],
    redis_note: str,
    *,
    beat: bool = False,
    pool: str = "threads",
) -> None:
    from worker.runtime.processes import startup_summary

    for line in startup_summary(settings, lanes=lanes, redis=redis_note, beat=beat, pool=pool):
        console.print(line, markup=False, soft_wrap=True)


def _say(text: str) -> None:
    """A supervisor's line, stamped like the children's log lines."""
    from datetime import datetime

    console.print(f"[{datetime.now():%Y-%m-%d %H:%M:%S}] {text}", markup=False, soft_wrap=True)


def _redis_of(settings: Settings) -> str:
    """The queue's Redis for the summary (configured, or the running embedded one)."""
    from worker.queue.redis import resolve_redis_url
    from worker.runtime.processes import redacted_url

    return redacted_url(resolve_redis_url(settings))


DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL of the store. Default: MEMWORKER_DATABASE_URL, else the embedded "
        "SQLite file in the data directory.",
        show_default=False,
    ),
]


def _url(database_url: str | None) -> str:
    from worker.settings import load_settings

    return database_url or load_settings().effective_database_url


def register_db(app: typer.Typer) -> None:
    """Add the ``db`` command group (``upgrade``, ``current``) to ``app``."""
    db = typer.Typer(help="The SQL memory store: schema migrations.", no_args_is_help=True)

    @db.command("upgrade")
    def upgrade(database_url: DatabaseUrl = None) -> None:
        """Migrate the store to the newest schema (creates it on an empty database)."""
        from worker.store import schema as migrate
        from worker.store.engine import create_store_engine

        with cli_errors():  # a bad URL exits 2, an unreachable server 4
            engine = create_store_engine(_url(database_url), create_dirs=True)
            try:
                before = migrate.current_revision(engine)
                migrate.upgrade(engine)
                after = migrate.current_revision(engine)
            finally:
                engine.dispose()
        if before == after:
            typer.echo(f"already at {after} (newest)")
        else:
            typer.echo(f"upgraded {before or 'empty database'} -> {after}")

    @db.command("current")
    def current(database_url: DatabaseUrl = None) -> None:
        """Show the store's schema revision and whether it is the newest."""
        from worker.store import schema as migrate
        from worker.store.engine import create_store_engine

        with cli_errors():
            engine = create_store_engine(_url(database_url))
            try:
                revision = migrate.current_revision(engine)
            finally:
                engine.dispose()
            head = migrate.head_revision()
        if revision is None:
            typer.echo(f"not migrated (newest is {head}); run `memworker db upgrade`")
            raise typer.Exit(code=1)
        state = "newest" if revision == head else f"behind {head}; run `memworker db upgrade`"
        typer.echo(f"{revision} ({state})")

    app.add_typer(db, name="db")


_console = make_console()

#: Upcoming fires shown per schedule: enough to see the rhythm (and a weekend gap).
FIRES_SHOWN = 3


def register_schedules(app: typer.Typer) -> None:
    app.command("schedules")(schedules)


def describe(spec: ScheduleSpec, now: datetime, count: int = FIRES_SHOWN) -> dict[str, Any]:
    """A schedule's next fires and the window each would cover on a first run."""
    from worker.service.schedules import lookback_window, next_ticks

    fires = next_ticks(spec.cron, spec.timezone, now, count)
    windows = [lookback_window(spec.cron, tick, tz=spec.timezone) for tick in fires]
    return {
        "name": spec.name,
        "cron": spec.cron,
        "timezone": spec.timezone,
        "action": spec.action,
        "scope": spec.scope.value if spec.scope else None,
        "enabled": spec.enabled,
        "description": spec.description,
        "next_fires": [tick.isoformat() for tick in fires],
        "windows": [
            {
                "start": w.start.isoformat(),
                "end": w.end.isoformat(),
                "seconds": w.duration.total_seconds(),
            }
            for w in windows
        ],
    }


def schedules(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the schedules beat runs: cron, timezone, next fires and their lookback windows."""
    from rich.table import Table

    from worker.service.schedules import bundled_schedules_dir, load_schedules
    from worker.settings import load_settings

    with cli_errors():
        settings = load_settings()
        directory = settings.schedules_dir or bundled_schedules_dir()
        now = datetime.now(UTC)
        described = [describe(spec, now) for spec in load_schedules(directory)]
        if as_json:
            print_json(described)
            return
        table = Table(title=f"schedules from {directory}")
        for column in ("name", "cron", "tz", "action", "next fires (UTC)", "looks back"):
            table.add_column(column)
        for d in described:
            name = d["name"] if d["enabled"] else f"{d['name']} (disabled)"
            fires = "\n".join(f[:16].replace("T", " ") for f in d["next_fires"])
            spans = "\n".join(_span(w["seconds"]) for w in d["windows"])
            table.add_row(name, d["cron"], d["timezone"], d["action"], fires, spans)
        _console.print(table)


def _span(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    days, hours = divmod(hours, 24)
    parts = [
        f"{days}d" if days else "",
        f"{hours}h" if hours else "",
        f"{rest // 60}m" if rest else "",
    ]
    return " ".join(p for p in parts if p) or "0m"
