"""The queue from a terminal: ``enqueue``, ``status`` and ``dlq``.

``memworker enqueue`` and ``memworker status``: the queue (and its health) from a terminal.

``status`` shows the queue per scope, then from SQL the last tick of every schedule with its
window and watermark, the sinks' delivery lag and the failed runs of the last day. Settings
come from the environment here, at the edge (``MEMWORKER_*``).

``memworker dlq``: batches that failed ``max_attempts`` times, kept until an operator acts.

``list`` shows each dead-lettered namespace with its last error; ``retry`` brings one back (or
``--all``, optionally only those whose last error matches) with a fresh attempt count, due now
so the next sweep merges it; ``drop`` deletes its pending candidates for good, after
confirmation.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import (
    JsonOpt,
    YesOpt,
    cli_errors,
    collector_paused,
    confirm,
    console,
    make_console,
    operator_session,
    print_json,
    progress_of,
    stderr,
)
from worker.errors import InvalidOption, MemworkerError, QueueUnavailable

if TYPE_CHECKING:
    from collections.abc import Iterator

    import redis
    from rich.table import Table

    from worker.queue.types import QueueStats
    from worker.settings import Settings
    from worker.store.memory import StoreHealth


#: ``status`` reads every shard and pages through pending namespaces: allow more than the hot
#: path's sub-second timeout, but fail rather than hang when Redis is stuck.
STATUS_TIMEOUT_SECONDS: Final = 5.0

#: "Recent" failed runs, as ``status`` counts them.
FAILED_RUNS_WINDOW: Final = timedelta(hours=24)

stdout = make_console()


def enqueue(
    text: Annotated[str, typer.Argument(help="What to remember (or, with --kind forget, remove).")],
    *,
    user: Annotated[str, typer.Option("--user", help="User id the memory belongs to.")],
    trace: Annotated[
        str | None, typer.Option("--trace", help="Trace id to record; generated when omitted.")
    ] = None,
    kind: Annotated[str, typer.Option("--kind", help="fact, turn or forget.")] = "fact",
    topic: Annotated[
        str | None, typer.Option("--topic", help="Memory file hint, e.g. preferences.")
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", help="Slot for supersession, e.g. preference.language.")
    ] = None,
    assistant: Annotated[
        str | None, typer.Option("--assistant", help="Assistant id (per-assistant memory).")
    ] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="Conversation thread id.")] = None,
    scope: Annotated[str, typer.Option("--scope", help="user or agent.")] = "user",
    occurred_at: Annotated[
        str | None,
        typer.Option(
            "--occurred-at",
            help="When it was said, ISO 8601 with an offset, e.g. 2025-03-01T09:30:00Z "
            "(default: now).",
        ),
    ] = None,
    org: Annotated[
        str | None, typer.Option("--org", help="The user's organisation, when there are orgs.")
    ] = None,
) -> None:
    """Queue one candidate memory, as the chat service would; prints its id."""
    from worker.queue.client import MemoryClient
    from worker.settings import load_settings

    with cli_errors():
        said = None if occurred_at is None else _parse_occurred_at(occurred_at)
        trace_id = trace or f"cli-{uuid.uuid4().hex[:16]}"
        with MemoryClient(load_settings()) as client:
            candidate_id = client.enqueue(
                user_id=user,
                trace_id=trace_id,
                text=text,
                kind=kind,
                topic=topic,
                key=key,
                assistant_id=assistant,
                thread_id=thread,
                scope=scope,
                source="cli",
                occurred_at=said,
                org_id=org,
            )
        stdout.print(candidate_id)
        if trace is None:
            stderr.print(f"trace id: {trace_id}")


def _parse_occurred_at(text: str) -> datetime:
    """``--occurred-at`` as a timezone-aware time; a time without an offset is refused rather
    than read as local time (the worker and the caller may sit in different zones)."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidOption(
            f"--occurred-at {text!r} is not an ISO 8601 time; e.g. 2025-03-01T09:30:00Z"
        ) from None
    if value.tzinfo is None:
        raise InvalidOption(
            f"--occurred-at {text!r} has no UTC offset; add one, e.g. {text.strip()}Z or "
            f"{text.strip()}+01:00"
        )
    return value


def status(
    *,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Queue health per scope, plus schedules (last tick, window), sink lag and failed runs."""
    with collector_paused():
        _status(as_json=as_json)


def _status(*, as_json: bool) -> None:
    import redis

    from worker.queue.redis import open_redis, resolve_redis_url
    from worker.queue.redis_queue import RedisQueue
    from worker.service.sweep import queue_health
    from worker.settings import load_settings

    with cli_errors(), contextlib.ExitStack() as opened:
        settings = load_settings()
        url = resolve_redis_url(settings)
        client = open_redis(url, timeout=STATUS_TIMEOUT_SECONDS)
        try:
            queue = RedisQueue(client, settings.for_queue)
            stats = queue.admin.stats()
            sinks = sink_sets(queue.admin.workers_sinks(), settings.sinks)
            store = opened.enter_context(_open_store(settings))  # once, for both reports
            redis_health = queue_health(queue.admin, store)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise _queue_unreadable(url, exc) from None
        finally:
            client.close()
        health = _store_health(settings, store, datetime.now(UTC))
        if as_json:
            # Scope keys stay at the top level (as before); the SQL parts sit beside them.
            body = {**stats.as_dict(), **health, "redis": redis_health, "worker_sinks": sinks}
            typer.echo(json.dumps(body, indent=2, default=str))
        else:
            stdout.print(_table(stats))
            _print_health(health)
            _print_sink_sets(sinks)
            _print_redis_health(redis_health)


def sink_sets(workers: list[str] | None, here: list[str]) -> dict[str, Any]:
    """The sinks the workers recorded at start beside this shell's ``MEMWORKER_SINKS``, and
    the difference each way (``workers`` None: no worker recorded its sinks yet).

    >>> sink_sets(["files", "langgraph"], ["files"])["missing_here"]
    ['langgraph']
    """
    mine = [s.strip() for s in here]
    return {
        "workers": workers,
        "here": mine,
        "missing_here": [s for s in workers or () if s not in mine],
        "not_in_workers": [] if workers is None else [s for s in mine if s not in workers],
    }


def _print_sink_sets(sinks: dict[str, Any]) -> None:
    here = ", ".join(sinks["here"]) or "none"
    if sinks["workers"] is None:
        stdout.print(f"sinks: no worker has recorded its sinks yet; this shell's: {here}")
        return
    stdout.print(f"sinks: the workers publish to {', '.join(sinks['workers']) or 'none'}")
    if sinks["missing_here"]:
        stdout.print(
            f"[yellow]this shell's MEMWORKER_SINKS ({here}) lacks "
            f"{', '.join(sinks['missing_here'])}[/yellow]: commands that write (reconcile, "
            "publish, put, rollback, approve, import, forget) refuse to run with it"
        )
    if sinks["not_in_workers"]:
        stdout.print(
            f"this shell also publishes to {', '.join(sinks['not_in_workers'])}, which the "
            "workers do not"
        )


def _queue_unreadable(url: str, exc: redis.ConnectionError | redis.TimeoutError) -> MemworkerError:
    """Why ``status`` could not read the queue: Redis is down or stuck (a refused password is
    named as the hot path names it). Status only reads, so nothing was changed."""
    import redis

    from worker.queue.redis import redacted, translate

    if isinstance(exc, redis.AuthenticationError):
        return translate(exc, redacted(url))
    if isinstance(exc, redis.TimeoutError):
        what = f"did not answer within {STATUS_TIMEOUT_SECONDS:g} s"
    else:
        what = f"is unreachable ({exc})"
    return QueueUnavailable(
        f"Redis at {redacted(url)} {what}, so the queue could not be read (nothing was "
        "changed). Start Redis (or `memworker run` for the embedded one) or fix "
        "MEMWORKER_REDIS_URL"
    )


@contextlib.contextmanager
def _open_store(settings: Settings) -> Iterator[StoreHealth]:
    """The store's health figures ``status`` reads (the embedded SQLite is created on first
    use); only the reads it shows, so the command does not import the store's write side."""
    from worker.store.memory import StoreHealth

    url = settings.effective_database_url
    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = StoreHealth.from_url(url, create=url.startswith("sqlite"))
    try:
        yield store
    finally:
        store.dispose()


def _print_redis_health(health: dict[str, Any]) -> None:
    durability, epoch = health["durability"], health["epoch"]
    primaries = health.get("cluster_primaries")
    topology = f"a cluster of {primaries} primaries, " if primaries else ""
    stdout.print(
        f"redis: {topology}appendonly {durability['appendonly'] or '?'}, appendfsync "
        f"{durability['appendfsync'] or '?'}, maxmemory-policy "
        f"{durability['maxmemory_policy'] or '?'}"
    )
    for warning in durability["warnings"]:
        stdout.print(f"  [yellow]warning:[/yellow] {warning}")
    beat = health.get("beat")
    stdout.print(
        f"beat: {beat} holds the beat lock" if beat else "beat: [yellow]none running[/yellow]"
    )
    if epoch["changed"]:
        stdout.print(
            f"  [red]queue epoch changed[/red] for {epoch['namespaces_from_an_earlier_epoch']} "
            f"recently committed namespace(s): {epoch['meaning']}"
        )
    rollback = health["rollback"]
    if rollback["detected"]:
        stdout.print(
            f"  [red]queue rolled back[/red] for {rollback['namespaces']} recently committed "
            f"namespace(s): {rollback['meaning']}"
        )


def _store_health(settings: Settings, store: StoreHealth, now: datetime) -> dict[str, Any]:
    """Schedules' last ticks and watermarks, sink lag and recent failed runs, from SQL."""
    from worker.service.schedules import bundled_schedules_dir, load_schedules

    schedules = []
    for spec in load_schedules(settings.schedules_dir or bundled_schedules_dir()):
        ticks = store.last_ticks(spec.name, limit=1)
        last = ticks[0] if ticks else None
        schedules.append(
            {
                "name": spec.name,
                "cron": spec.cron,
                "action": spec.action,
                "enabled": spec.enabled,
                "watermark": _iso(store.watermark(spec.name)),
                "last_tick": None
                if last is None
                else {
                    "tick": _iso(last.tick),
                    "status": last.status,
                    "window": [_iso(t) for t in last.window] if last.window else None,
                    "error": last.error,
                },
            }
        )
    sinks = {
        name: {"pending": lag.pending, "oldest_age_seconds": lag.oldest_age_seconds}
        for name, lag in sorted(store.outbox_lag(now=now).items())
    }
    breakers = {
        h.sink: {
            "state": h.state(now),
            "consecutive_failures": h.consecutive_failures,
            "open_until": _iso(h.open_until),
            "last_error": h.last_error,
        }
        for h in store.sink_health()
        if h.consecutive_failures
    }
    failed = store.count_runs(outcome="failed", since=now - FAILED_RUNS_WINDOW)
    return {
        "schedules": schedules,
        "sinks": sinks,
        "failing_sinks": breakers,
        "failed_runs_24h": failed,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value is not None else None


def _short(iso: str | None) -> str:
    """``2026-01-05T03:00:00+00:00`` as ``2026-01-05 03:00`` (UTC) for the table."""
    return iso[:16].replace("T", " ") if iso else "-"


def _print_health(health: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title="schedules")
    for column in ("schedule", "cron", "last tick", "status", "window", "watermark"):
        table.add_column(column, no_wrap=column in ("schedule", "cron"))
    for s in health["schedules"]:
        last = s["last_tick"] or {}
        window = " .. ".join(_short(t) for t in last["window"]) if last.get("window") else "-"
        status = last.get("status", "never ran")
        if last.get("error"):
            status = f"[red]{status}[/red]"
        table.add_row(
            s["name"], s["cron"], _short(last.get("tick")), status, window,
            _short(s["watermark"]),
        )  # fmt: skip
    stdout.print(table)
    if health["sinks"]:
        lag = ", ".join(
            f"{name}: {v['pending']} undelivered (oldest {_age(v['oldest_age_seconds'])})"
            for name, v in health["sinks"].items()
        )
    else:
        lag = "every committed version is delivered"
    stdout.print(f"sink delivery lag: {lag}")
    for name, b in health.get("failing_sinks", {}).items():
        until = f", left alone until {_short(b['open_until'])}" if b["state"] == "open" else ""
        stdout.print(
            f"[red]sink {name} failing[/red]: {b['consecutive_failures']} failure(s) in a row"
            f"{until}; last error: {b['last_error']}"
        )
    failed = health["failed_runs_24h"]
    style = "red" if failed else "green"
    stdout.print(f"failed runs in the last 24 h: [{style}]{failed}[/{style}]")


def _age(seconds: float | None) -> str:
    """Human age: ``-``, ``42s``, ``7m05s``, ``3h12m``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _table(stats: QueueStats) -> Table:
    from rich.table import Table

    from worker.queue.types import ScopeStats

    table = Table(title="memworker queue")
    for column in ("scope", "pending", "waiting", "due", "leased", "dead", "oldest pending"):
        table.add_column(column, justify="left" if column == "scope" else "right")

    def row(name: str, s: ScopeStats, style: str | None = None) -> None:
        dead = f"[red]{s.dead}[/red]" if s.dead else "0"
        table.add_row(
            name,
            str(s.pending),
            str(s.waiting),
            str(s.due),
            str(s.leased),
            dead,
            _age(s.oldest_pending_age),
            style=style,
        )

    for name, scope_stats in sorted(stats.scopes.items()):
        row(name, scope_stats)
    row("total", stats.total, style="bold")
    return table


def register_queue(app: typer.Typer) -> None:
    """Add ``enqueue`` and ``status`` to the ``memworker`` app."""
    app.command("enqueue")(enqueue)
    app.command("status")(status)


NamespaceArg = Annotated[str, typer.Argument(metavar="NS", help="A namespace, e.g. user:u1.")]


def register_dlq(app: typer.Typer) -> None:
    dlq = typer.Typer(help="Dead-lettered batches: list, retry, drop.", no_args_is_help=True)
    dlq.command("list")(list_dead)
    dlq.command("retry")(retry)
    dlq.command("drop")(drop)
    app.add_typer(dlq, name="dlq")


def list_dead(as_json: JsonOpt = False) -> None:
    """Every dead-lettered namespace, longest dead first, with its last error."""
    from rich.table import Table

    with operator_session() as runtime:
        letters = runtime.queue.admin.dead_letters()
        if as_json:
            print_json(
                [
                    {
                        "namespace": d.namespace,
                        "attempts": d.attempts,
                        "pending": d.pending,
                        "dead_since": d.dead_since.isoformat(timespec="seconds"),
                        "last_error": d.last_error,
                    }
                    for d in letters
                ]
            )
            return
        if not letters:
            console.print("no dead letters")
            return
        table = Table(title="dead letters")
        for column in ("namespace", "attempts", "pending", "dead since", "last error"):
            table.add_column(column, overflow="fold")
        for d in letters:
            table.add_row(
                d.namespace, str(d.attempts), str(d.pending),
                d.dead_since.isoformat(timespec="seconds"), d.last_error or "-",
            )  # fmt: skip
        console.print(table)
        console.print("retry one with `memworker dlq retry NS` once its cause is fixed")


def retry(
    namespace: Annotated[
        str | None, typer.Argument(metavar="[NS]", help="A namespace, e.g. user:u1.")
    ] = None,
    every: Annotated[bool, typer.Option("--all", help="Retry every dead letter.")] = False,
    error_contains: Annotated[
        str | None,
        typer.Option(help="With --all: only those whose last error contains this text."),
    ] = None,
) -> None:
    """Bring a dead-lettered namespace (or --all) back with a fresh attempt count; due now."""
    from worker.models import Namespace
    from worker.service.sweep import retry_dead_letter, retry_dead_letters

    with operator_session() as runtime:
        if (namespace is None) == (not every):
            raise InvalidOption("name one namespace (NS) or pass --all, not both")
        if error_contains is not None and not every:
            raise InvalidOption("--error-contains filters --all; with one NS, drop it")
        if every:
            done = retry_dead_letters(
                runtime.queue.admin,
                error_contains=error_contains,
                progress=progress_of("dlq retry"),
            )
            note = f"; {done.left} other dead letter(s) left" if done.left else ""
            console.print(f"{len(done.namespaces)} namespace(s) back in the queue, due now{note}")
            return
        assert namespace is not None
        key = Namespace.parse(namespace).key
        pending = retry_dead_letter(runtime.queue.admin, key)
        console.print(
            f"{key}: back in the queue with {pending} pending candidate(s), due now "
            f"(or merge it at once: `memworker reconcile --namespace {key}`)"
        )


def drop(namespace: NamespaceArg, yes: YesOpt = False) -> None:
    """Delete a dead-lettered namespace's pending candidates for good."""
    from worker.models import Namespace
    from worker.service.sweep import drop_dead_letter

    with operator_session() as runtime:
        key = Namespace.parse(namespace).key

        def ask(pending: int) -> None:
            confirm(f"Delete the {pending} pending candidate(s) of {key} for good?", yes)

        dropped = drop_dead_letter(runtime.queue.admin, key, confirm=ask)
        console.print(f"{key}: dropped {dropped} candidate(s)")
