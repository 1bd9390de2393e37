"""``memworker reconcile``: consolidate now, by hand, through the same claim and fence as workers.

Safe while workers run: a namespace is consolidated only under its queue lease (a namespace a
worker holds is reported, not touched) and commits go through the database fence and the
unique ledger, so nothing is merged twice. ``--dry-run`` takes no lease and writes nothing:
it merges the pending candidates in memory and prints the diff.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.errors import EXIT_FAILURE
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    describe_delivery,
    now_utc,
    operator_session,
    parse_duration,
    record_delivery,
)
from worker.cli.progress import progress_of
from worker.errors import InvalidOption

if TYPE_CHECKING:
    from worker.models import Namespace
    from worker.runtime.container import Runtime
    from worker.service.publish import DeliveryReport
    from worker.service.reconcile import Reconciled
    from worker.service.scan import SourceScan

log = logging.getLogger(__name__)

#: What reconcile accepts as its target, for the error when none is given.
_TARGETS: Final = "--user U [--assistant A], --org O, --namespace NS, or --all for every namespace"

#: Colour of each outcome's line, keyed by the outcome's value (an ``Outcome`` is a ``str``
#: enum, so it finds its own entry); any other outcome is a failure, shown red.
_STYLES: Final = {
    "committed": "green",
    "dry_run": "yellow",
    "nothing_new": "dim",
    "nothing_pending": "dim",
    "leased": "cyan",
}


def _json_of(r: Reconciled, versions: dict[str, int]) -> dict[str, Any]:
    from worker.outcomes import Outcome
    from worker.service.batch import BatchResult

    res = r.result or BatchResult(r.namespace, Outcome.NOTHING_NEW)
    return {
        "namespace": r.namespace,
        "outcome": r.outcome.value,
        "note": r.note,
        "candidates": res.candidates,
        "skipped": res.skipped,
        "revision": res.version,
        "counts": res.counts,
        "error": res.error,
        "files": [
            {"path": f.path, "version": versions.get(f.path), "diff": f.diff, "content": f.content}
            for f in res.files
        ],
    }


def register_reconcile(app: typer.Typer) -> None:
    app.command("reconcile")(reconcile)


def reconcile(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
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
    diff: Annotated[
        bool,
        typer.Option(
            "--diff",
            help="With --all: print every namespace's outcome and diff (one namespace always "
            "shows its own), not only those that need attention and the summary.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Consolidate what is pending now (safe while workers run), show diffs, publish.

    One namespace prints its diff. ``--all`` prints a progress bar on a terminal, then a line
    for each namespace that needs attention (failed, dead-lettered) and the summary: over a
    large queue, every diff would be thousands of lines (``--diff`` prints them).
    """
    from worker.service.reconcile import reconcile_targets

    with operator_session(writes=not dry_run) as runtime:
        # Open the store first, so a bad database URL is refused (exit 2) even when the queue
        # happens to be empty and nothing would have touched it.
        runtime.store  # noqa: B018
        lookback = parse_duration(since) if since is not None else None
        if all_ and (user or assistant or namespace or org):
            raise InvalidOption("give either --all or one namespace (--user/--org/--namespace)")
        target = (
            None if all_ else namespace_from(user, assistant, namespace, org, accepted=_TARGETS)
        )
        check_model(runtime)
        scan = _rescan(runtime, target, lookback, dry_run) if lookback is not None else None
        if scan is not None and not as_json:
            _print_scan(scan, lookback)
        run = reconcile_targets(
            runtime.pipeline,
            runtime.sinks,
            target,
            scan=scan,
            dry_run=dry_run,
            now=now_utc(),
            progress=progress_of("reconcile", show=target is None and not as_json),
        )
        done, versions = run.done, run.versions
        delivery = record_delivery(run.delivery) if run.delivery is not None else None
        if as_json:
            print_json(_report_json(done, versions, scan, dry_run, delivery))
        else:
            every = target is not None or diff
            for r in done:
                if every or r.outcome.undone:
                    _print_one(r, versions[r.namespace], diff=every)
            _print_summary(done, dry_run)
            if not every and done:
                console.print("(`--diff` prints each namespace's outcome and diff)")
            if delivery is not None:
                console.print(describe_delivery(delivery, runtime))
        if any(r.outcome.undone for r in done):
            raise typer.Exit(EXIT_FAILURE)


def check_model(runtime: Runtime) -> None:
    """Before any batch: the model builds (one line, exit 2, for a missing package or
    credentials) and its server answers (exit 4), as at a worker's start."""
    from worker.service.startup import probe_model_server

    runtime.consolidator  # noqa: B018 - building it is the check
    probe_model_server(runtime.settings.for_consolidation)


def _report_json(
    done: Sequence[Reconciled],
    versions: dict[str, dict[str, int]],
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
        "namespaces": [_json_of(r, versions[r.namespace]) for r in done],
        "summary": _summary(done),
        "published": delivery.delivered if delivery else 0,
        "undelivered": delivery.remaining if delivery else 0,
        "set_aside": [
            a.as_dict()
            for a in (scan.set_aside if scan else ()) + (delivery.set_aside if delivery else ())
        ],
    }


def _rescan(
    runtime: Runtime, target: Namespace | None, lookback: timedelta, dry_run: bool
) -> SourceScan:
    """Pull conversations updated in ``(now - lookback, now]`` from the sources as candidates
    (of ``target`` only, when given); a dry run only collects them."""
    from worker.cli.ops_scan import scan_now

    end = now_utc()
    return scan_now(
        runtime, target, start=end - lookback, end=end, enqueue=not dry_run, trace="reconcile"
    )


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
    for aside in scan.set_aside:
        console.print(f"  [yellow]set aside[/yellow] {aside.describe()}", highlight=False)


def _print_one(r: Reconciled, versions: dict[str, int], *, diff: bool = True) -> None:
    from rich.syntax import Syntax

    from worker.outcomes import Outcome

    style = _STYLES.get(r.outcome, "red")
    res = r.result
    label = r.outcome.replace("_", " ")
    inside = []
    if r.outcome is Outcome.COMMITTED and res is not None:
        label = f"committed namespace revision {res.version}"
        inside.append(file_versions_words(versions))
    if res is not None and res.candidates:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(res.counts.items()) if v)
        inside.append(f"{res.candidates} candidate(s): {counts or 'no changes'}")
    shown = [part for part in inside if part]
    details = f" ({'; '.join(shown)})" if shown else ""
    console.print(f"[{style}]{r.namespace}: {label}[/{style}]{details}")
    if r.note:
        console.print(f"  {r.note}", markup=False)
    if res is not None and res.error:
        console.print(f"  error: {res.error}", style="red", markup=False)
    for change in res.files if res is not None and diff else ():
        console.print(Syntax(change.diff or "(no textual change)", "diff", theme="ansi_dark"))


def file_versions_words(versions: dict[str, int]) -> str:
    """The files a commit changed, each with its own version. One vocabulary for the two
    counters: a namespace's *revision* counts its commits (of any of its files); a file's
    *version* counts that file's own changes, as ``memworker history`` lists them.

    >>> file_versions_words({"/work.md": 1, "/preferences.md": 3})
    '/preferences.md version 3, /work.md version 1'
    """
    return ", ".join(f"{path} version {v}" for path, v in sorted(versions.items()))


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
