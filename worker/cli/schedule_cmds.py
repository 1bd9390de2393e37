"""``memworker schedules``: what beat will fire, when, and over which window."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from worker.cli.common import print_json
from worker.cli.console import make_console
from worker.cli.errors import cli_errors

if TYPE_CHECKING:
    from worker.scheduling.schedules import ScheduleSpec

_console = make_console()

#: Upcoming fires shown per schedule: enough to see the rhythm (and a weekend gap).
FIRES_SHOWN = 3


def register_schedules(app: typer.Typer) -> None:
    app.command("schedules")(schedules)


def describe(spec: ScheduleSpec, now: datetime, count: int = FIRES_SHOWN) -> dict[str, Any]:
    """A schedule's next fires and the window each would cover on a first run."""
    from worker.scheduling.cron import lookback_window, next_ticks

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

    from worker.scheduling.schedules import bundled_schedules_dir, load_schedules
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
