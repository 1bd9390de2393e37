"""``memworker reconcile``: consolidate now, by hand, through the same claim and fence as workers.

Safe while workers run: a namespace is consolidated only under its queue lease (a namespace a
worker holds is reported, not touched) and commits go through the database fence and the
unique ledger, so nothing is merged twice. ``--dry-run`` takes no lease and writes nothing:
it merges the pending candidates in memory and prints the diff.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.errors import EXIT_FAILURE, stderr
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    UserOpt,
    console,
    describe_delivery,
    now_utc,
    operator_session,
    parse_duration,
    publish,
    require_known,
)
from worker.errors import InvalidOption

if TYPE_CHECKING:
    from worker.models import Namespace
    from worker.runtime.container import Runtime
    from worker.service.publish import DeliveryReport
    from worker.service.reconcile import Reconciled
    from worker.service.scan import SourceScan

log = logging.getLogger(__name__)

#: What reconcile accepts as its target, for the error when none is given.
_TARGETS: Final = "--user U [--assistant A], --namespace NS, or --all for every namespace"

#: Colour of each outcome's line, keyed by the outcome's value (an ``Outcome`` is a ``str``
#: enum, so it finds its own entry); any other outcome is a failure, shown red.
_STYLES: Final = {
    "committed": "green",
    "dry_run": "yellow",
    "nothing_new": "dim",
    "nothing_pending": "dim",
    "leased": "cyan",
}


def _json_of(r: Reconciled) -> dict[str, Any]:
    from worker.outcomes import Outcome
    from worker.service.batch import BatchResult

    res = r.result or BatchResult(r.namespace, Outcome.NOTHING_NEW)
    return {
        "namespace": r.namespace,
        "outcome": r.outcome.value,
        "note": r.note,
        "candidates": res.candidates,
        "skipped": res.skipped,
        "version": res.version,
        "counts": res.counts,
        "error": res.error,
        "files": [{"path": f.path, "diff": f.diff, "content": f.content} for f in res.files],
    }


def register(app: typer.Typer) -> None:
    app.command("reconcile")(reconcile)


def reconcile(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Every namespace the queue knows.")] = False,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Re-scan the sources over this window first, e.g. 6h, 2d (needs "
            "MEMWORKER_LANGGRAPH_URL).",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the diff; take no lease, write nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Consolidate what is pending now (safe while workers run), show diffs, publish."""
    from worker.outcomes import Outcome
    from worker.service.reconcile import reconcile_namespace

    with operator_session() as runtime:
        # Open the store first, so a bad database URL is refused (exit 2) even when the queue
        # happens to be empty and nothing would have touched it.
        runtime.store  # noqa: B018
        lookback = parse_duration(since) if since is not None else None
        if all_ and (user or assistant or namespace):
            raise InvalidOption("give either --all or one namespace (--user/--namespace)")
        target = None if all_ else namespace_from(user, assistant, namespace, accepted=_TARGETS)
        scan = _rescan(runtime, target, lookback, dry_run) if lookback is not None else None
        if scan is not None and not as_json:
            _print_scan(scan, lookback)
        if target is None:
            keys = sorted(set(runtime.queue.namespaces()) | set(scan.by_namespace if scan else ()))
        else:
            if not (scan and scan.by_namespace.get(target.key)):
                require_known(runtime, target)
            keys = [target.key]
        done: list[Reconciled] = []
        with _progress(len(keys), show=target is None and not as_json) as advance:
            for key in keys:
                extra = scan.by_namespace.get(key, []) if scan and dry_run else []
                done.append(
                    reconcile_namespace(
                        runtime.pipeline, key, dry_run=dry_run, extra=extra, now=now_utc()
                    )
                )
                advance(key)
        delivery = None
        if any(r.outcome is Outcome.COMMITTED for r in done):
            delivery = publish(
                runtime, [r.namespace for r in done if r.outcome is Outcome.COMMITTED]
            )
        if as_json:
            print_json(_report_json(done, scan, dry_run, delivery))
        else:
            for r in done:
                _print_one(r)
            _print_summary(done, dry_run)
            if delivery is not None:
                console.print(describe_delivery(delivery, runtime))
        if any(r.outcome.undone for r in done):
            raise typer.Exit(EXIT_FAILURE)


def _report_json(
    done: Sequence[Reconciled],
    scan: SourceScan | None,
    dry_run: bool,
    delivery: DeliveryReport | None,
) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "scan": None
        if scan is None
        else {
            "configured": scan.configured,
            "threads": scan.threads,
            "candidates": len(scan.candidates),
        },
        "namespaces": [_json_of(r) for r in done],
        "summary": _summary(done),
        "published": delivery.delivered if delivery else 0,
        "undelivered": delivery.remaining if delivery else 0,
    }


def _rescan(
    runtime: Runtime, target: Namespace | None, lookback: timedelta, dry_run: bool
) -> SourceScan:
    """Pull conversations updated in ``(now - lookback, now]`` from the sources as candidates
    (of ``target`` only, when given); a dry run only collects them."""
    from worker.service.scan import scan_sources

    end = now_utc()
    return scan_sources(
        runtime.queue,
        runtime.store,
        runtime.settings,
        start=end - lookback,
        end=end,
        trace_id=f"reconcile-{end:%Y%m%dT%H%M%S}",
        now=end,
        keep=lambda key: target is None or key == target.key,
        assistant_id=target.assistant_id if target is not None else None,
        enqueue=not dry_run,
    )


@contextmanager
def _progress(total: int, *, show: bool) -> Iterator[Any]:
    """A progress bar on stderr for ``--all`` (stdout stays the report)."""
    if not show or total == 0:
        yield lambda _key: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("[bold]reconcile[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=total)
        yield lambda key: bar.update(task, advance=1, description=key)


def _print_scan(scan: SourceScan, lookback: timedelta | None) -> None:
    if not scan.configured:
        console.print(
            "no source configured (MEMWORKER_LANGGRAPH_URL is unset): nothing to re-scan; "
            "reconciling what is queued"
        )
        return
    console.print(
        f"re-scanned the last {lookback}: {scan.threads} thread(s), "
        f"{len(scan.candidates)} new candidate(s)"
    )


def _print_one(r: Reconciled) -> None:
    from rich.syntax import Syntax

    from worker.outcomes import Outcome

    style = _STYLES.get(r.outcome, "red")
    res = r.result
    label = r.outcome.replace("_", " ")
    if r.outcome is Outcome.COMMITTED and res is not None:
        label = f"committed version {res.version}"
    details = ""
    if res is not None and res.candidates:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(res.counts.items()) if v)
        details = f" ({res.candidates} candidate(s): {counts or 'no changes'})"
    console.print(f"[{style}]{r.namespace}: {label}[/{style}]{details}")
    if r.note:
        console.print(f"  {r.note}", markup=False)
    if res is not None and res.error:
        console.print(f"  error: {res.error}", style="red", markup=False)
    for change in res.files if res is not None else ():
        console.print(Syntax(change.diff or "(no textual change)", "diff", theme="ansi_dark"))


def _summary(done: Sequence[Reconciled]) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    for r in done:
        if r.result is not None:
            counts.update(r.result.counts)
    return {
        "namespaces": len(done),
        "outcomes": dict(Counter(r.outcome.value for r in done)),
        "candidates": sum(r.result.candidates for r in done if r.result is not None),
        "counts": {k: v for k, v in sorted(counts.items()) if v},
    }


def _print_summary(done: Sequence[Reconciled], dry_run: bool) -> None:
    s = _summary(done)
    outcomes = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(s["outcomes"].items()))
    counts = ", ".join(f"{k} {v}" for k, v in s["counts"].items()) or "no changes"
    head = "summary (dry run, nothing committed)" if dry_run else "summary"
    console.print(
        f"[bold]{head}:[/bold] {s['namespaces']} namespace(s): {outcomes}; "
        f"{s['candidates']} candidate(s): {counts}"
    )
