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
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any, Final

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.syntax import Syntax

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
from worker.consolidation.pipeline import BatchResult
from worker.errors import InvalidCandidate
from worker.models import Candidate, Namespace
from worker.runtime.container import Runtime
from worker.sources.langgraph_threads import CURSOR_SOURCE

log = logging.getLogger(__name__)

#: Outcomes that leave work undone: the command exits 1 so scripts notice.
FAILED_OUTCOMES: Final = frozenset({"failed", "dead", "stale", "dead_lettered"})

_STYLES: Final = {
    "committed": "green",
    "dry_run": "yellow",
    "nothing_new": "dim",
    "nothing_pending": "dim",
    "leased": "cyan",
}


@dataclass(frozen=True)
class Reconciled:
    """What reconcile did for one namespace (``result`` when it consolidated or previewed)."""

    namespace: str
    outcome: str
    result: BatchResult | None = None
    note: str | None = None

    def as_json(self) -> dict[str, Any]:
        r = self.result or BatchResult(self.namespace, "nothing_new")
        return {
            "namespace": self.namespace,
            "outcome": self.outcome,
            "note": self.note,
            "candidates": r.candidates,
            "skipped": r.skipped,
            "version": r.version,
            "counts": r.counts,
            "error": r.error,
            "files": [{"path": f.path, "diff": f.diff, "content": f.content} for f in r.files],
        }


@dataclass
class Scan:
    """Candidates a ``--since`` re-scan found, per namespace."""

    configured: bool
    threads: int = 0
    by_namespace: dict[str, list[Candidate]] = field(default_factory=dict)

    @property
    def candidates(self) -> int:
        return sum(len(c) for c in self.by_namespace.values())


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
    with operator_session() as runtime:
        lookback = parse_duration(since) if since is not None else None
        if all_ and (user or assistant or namespace):
            raise InvalidCandidate("give either --all or one namespace (--user/--namespace)")
        target = None if all_ else namespace_from(user, assistant, namespace)
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
                done.append(_reconcile_one(runtime, key, dry_run=dry_run, extra=extra))
                advance(key)
        delivery = None
        if any(r.outcome == "committed" for r in done):
            delivery = publish(runtime)
        if as_json:
            print_json(
                {
                    "dry_run": dry_run,
                    "scan": None
                    if scan is None
                    else {
                        "configured": scan.configured,
                        "threads": scan.threads,
                        "candidates": scan.candidates,
                    },
                    "namespaces": [r.as_json() for r in done],
                    "summary": _summary(done),
                    "published": delivery.delivered if delivery else 0,
                }
            )
        else:
            for r in done:
                _print_one(r)
            _print_summary(done, dry_run)
            if delivery is not None:
                console.print(describe_delivery(delivery, runtime))
        if any(r.outcome in FAILED_OUTCOMES for r in done):
            raise typer.Exit(EXIT_FAILURE)


def _reconcile_one(
    runtime: Runtime, key: str, *, dry_run: bool, extra: Sequence[Candidate]
) -> Reconciled:
    state = runtime.queue.namespace_state(key)
    if state.leased:
        return _leased(key)
    if state.dead:
        return Reconciled(
            key,
            "dead_lettered",
            note=f"dead-lettered after {state.attempts} attempt(s) (last error: "
            f"{state.last_error or 'none recorded'}); `memworker dlq retry {key}` brings it back",
        )
    if dry_run:
        return _preview(runtime, key, extra)
    claim = runtime.queue.claim_namespace(key)
    if claim is None:
        # A worker may have claimed it since we looked: say so rather than "nothing pending".
        if runtime.queue.namespace_state(key).leased:
            return _leased(key)
        return Reconciled(key, "nothing_pending")
    result = runtime.pipeline.consolidate(claim, trigger="reconcile")
    return Reconciled(key, result.outcome, result)


def _leased(key: str) -> Reconciled:
    return Reconciled(
        key,
        "leased",
        note="being consolidated by a worker now; that worker commits it (candidates that "
        "arrived meanwhile are merged in the next batch)",
    )


def _preview(runtime: Runtime, key: str, extra: Sequence[Candidate]) -> Reconciled:
    """Merge what a claim would cover, in memory only: no lease, no run row, no commit."""
    result = runtime.pipeline.preview(key, extra)
    if result.outcome == "nothing_new" and not result.skipped:
        return Reconciled(key, "nothing_pending", result)
    return Reconciled(key, result.outcome, result)


def _rescan(runtime: Runtime, target: Namespace | None, lookback: timedelta, dry_run: bool) -> Scan:
    """Pull conversations updated in ``(now - lookback, now]`` from the sources as candidates.

    A dry run only collects them (nothing is enqueued, no cursor moves); otherwise they are
    enqueued first and cursors advance only for threads whose candidates were kept.
    """
    settings = runtime.settings
    if not settings.langgraph_url:
        return Scan(configured=False)
    from langgraph_sdk import get_sync_client

    from worker.sources.langgraph_threads import collect_threads

    end = now_utc()
    client = get_sync_client(url=settings.langgraph_url, api_key=settings.langgraph_api_key)
    found = collect_threads(
        client,
        end - lookback,
        end,
        cursors=runtime.store,
        assistant_id=target.assistant_id if target is not None else None,
        trace_id=f"reconcile-{end:%Y%m%dT%H%M%S}",
        max_text_bytes=settings.max_text_bytes,
        now=end,
    )
    kept = [c for c in found.candidates if target is None or c.namespace == target.key]
    scan = Scan(configured=True, threads=len(found.threads_seen))
    for c in kept:
        scan.by_namespace.setdefault(c.namespace, []).append(c)
    if dry_run:
        return scan
    if kept:
        runtime.queue.enqueue_many(kept)
    # Other users' threads were scanned too: leave their cursors so their next scan sees them.
    kept_ids = {c.id for c in kept}
    foreign = {c.thread_id for c in found.candidates if c.id not in kept_ids}
    for thread_id, message_id in found.cursor_updates.items():
        if thread_id not in foreign:
            runtime.store.set_cursor(CURSOR_SOURCE, thread_id, message_id, now=end)
    return scan


@contextmanager
def _progress(total: int, *, show: bool) -> Iterator[Any]:
    """A progress bar on stderr for ``--all`` (stdout stays the report)."""
    if not show or total == 0:
        yield lambda _key: None
        return
    with Progress(
        TextColumn("[bold]reconcile[/bold] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=stderr,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=total)
        yield lambda key: bar.update(task, advance=1, description=key)


def _print_scan(scan: Scan, lookback: timedelta | None) -> None:
    if not scan.configured:
        console.print(
            "no source configured (MEMWORKER_LANGGRAPH_URL is unset): nothing to re-scan; "
            "reconciling what is queued"
        )
        return
    console.print(
        f"re-scanned the last {lookback}: {scan.threads} thread(s), "
        f"{scan.candidates} new candidate(s)"
    )


def _print_one(r: Reconciled) -> None:
    style = _STYLES.get(r.outcome, "red")
    res = r.result
    label = r.outcome.replace("_", " ")
    if r.outcome == "committed" and res is not None:
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
        "outcomes": dict(Counter(r.outcome for r in done)),
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
