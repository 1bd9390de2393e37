"""``memworker scan``: run the nightly source scan now, for everyone or for one namespace.

The scan is :func:`worker.service.scan.scan_sources`, the same use case the ``scan_sources``
schedule runs: conversations updated in the window (LangGraph threads), the agents' inbox items
and their direct edits of memory files (with the LangGraph store sink) become candidates, are
queued and marked due now, so the workers merge them within seconds. Per-thread cursors make a
repeated scan harmless: a message already read is never queued twice. ``--dry-run`` reads and
counts, and writes nothing anywhere.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    now_utc,
    operator_session,
    parse_duration,
)
from worker.errors import ConfigurationError

if TYPE_CHECKING:
    from worker.models import Namespace
    from worker.runtime.container import Runtime
    from worker.service.scan import SourceScan

#: The window a scan looks back over by default: the nightly schedule's, one day.
DEFAULT_SINCE: Final = "1d"


def register_scan(app: typer.Typer) -> None:
    app.command("scan")(scan)


def scan(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    since: Annotated[
        str, typer.Option("--since", help="How far back to look, e.g. 6h, 2d.")
    ] = DEFAULT_SINCE,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would be queued; write nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Scan the sources now (threads, inbox, agents' edits): what is new is queued, due now."""
    with operator_session() as runtime:
        lookback = parse_duration(since)
        target = None
        if user or assistant or namespace or org:
            target = namespace_from(user, assistant, namespace, org)
        if not runtime.settings.langgraph_url:
            raise ConfigurationError(
                "no source to scan: MEMWORKER_LANGGRAPH_URL is unset (the LangGraph server "
                "whose threads, inbox and store memworker reads); set it and scan again"
            )
        end = now_utc()
        found = scan_now(runtime, target, start=end - lookback, end=end, enqueue=not dry_run)
        if as_json:
            print_json(_json_scan(found, end - lookback, end, dry_run))
            return
        _print_found(found, since, target, dry_run)


def scan_now(
    runtime: Runtime,
    target: Namespace | None,
    *,
    start: datetime,
    end: datetime,
    enqueue: bool,
    trace: str = "scan",
) -> SourceScan:
    """The sources over ``(start, end]``, for ``target`` only when given (``reconcile
    --since`` scans through here too); without ``enqueue`` nothing is written."""
    from worker.runtime.parts import scan_parts
    from worker.service.scan import scan_sources

    with scan_parts(runtime.settings) as parts:
        return scan_sources(
            runtime.queue,
            runtime.store,
            parts,
            start=start,
            end=end,
            trace_id=f"{trace}-{end:%Y%m%dT%H%M%S}",
            now=end,
            keep=lambda key: target is None or key == target.key,
            assistant_id=target.assistant_id if target is not None else None,
            enqueue=enqueue,
        )


def _counts(found: SourceScan) -> dict[str, int]:
    return {key: len(candidates) for key, candidates in sorted(found.by_namespace.items())}


def _json_scan(found: SourceScan, start: datetime, end: datetime, dry_run: bool) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "window": [start.isoformat(timespec="seconds"), end.isoformat(timespec="seconds")],
        "threads": found.threads,
        "candidates": len(found.candidates),
        "inbox": found.inbox,
        "inbox_removed": found.inbox_removed,
        "agent_edits": found.agent_edits,
        "namespaces": _counts(found),
        "set_aside": [aside.as_dict() for aside in found.set_aside],
    }


def _print_found(found: SourceScan, since: str, target: Namespace | None, dry_run: bool) -> None:
    whose = f" of {target.key}" if target is not None else ""
    verb = "would queue" if dry_run else "queued"
    console.print(
        f"scanned the last {since}{whose}: {found.threads} thread(s), "
        f"{len(found.candidates)} new candidate(s) from conversations, {found.inbox} from the "
        f"inbox, {found.agent_edits} agent edit(s)"
    )
    for key, count in _counts(found).items():
        console.print(f"  {key}: {verb} {count} candidate(s)")
    for aside in found.set_aside:
        console.print(f"  [yellow]set aside[/yellow] {aside.describe()}", highlight=False)
    if dry_run:
        console.print("dry run: nothing was queued and no cursor moved")
    elif found.candidates or found.inbox or found.agent_edits:
        again = f" --namespace {target.key}" if target is not None else " --all"
        console.print(
            f"due now: the workers merge them in seconds (or at once: memworker reconcile{again})"
        )
