"""``memworker enqueue`` and ``memworker status``: the queue from a terminal.

Settings come from the environment here, at the edge (``MEMWORKER_*``).
"""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Final

import redis
import typer
from rich.console import Console
from rich.table import Table

from worker.cli.errors import cli_errors, stderr
from worker.hotpath.client import MemoryClient
from worker.hotpath.connection import connect, unavailable
from worker.queue.redis_queue import RedisQueue
from worker.queue.types import QueueStats, ScopeStats
from worker.runtime.embedded_redis import resolve_redis_url
from worker.settings import load_settings

#: ``status`` reads every shard and pages through pending namespaces: allow more than the hot
#: path's sub-second timeout, but fail rather than hang when Redis is stuck.
STATUS_TIMEOUT_SECONDS: Final = 5.0

stdout = Console(highlight=False)


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
) -> None:
    """Queue one candidate memory, as the chat service would; prints its id."""
    with cli_errors():
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
            )
        stdout.print(candidate_id)
        if trace is None:
            stderr.print(f"trace id: {trace_id}")


def status(
    *,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Queue health per scope: pending candidates, waiting/due/leased/dead namespaces, lag."""
    with cli_errors():
        settings = load_settings()
        url = resolve_redis_url(settings.redis_url, settings.data_dir)
        client = connect(url, STATUS_TIMEOUT_SECONDS)
        try:
            stats = RedisQueue(client, settings).stats()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise unavailable(url, exc, STATUS_TIMEOUT_SECONDS) from None
        finally:
            client.close()
        if as_json:
            typer.echo(json.dumps(stats.as_dict(), indent=2))
        else:
            stdout.print(_table(stats))


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


def register(app: typer.Typer) -> None:
    """Add ``enqueue`` and ``status`` to the ``memworker`` app."""
    app.command("enqueue")(enqueue)
    app.command("status")(status)
