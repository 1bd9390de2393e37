"""Operating commands: ``reconcile``, ``publish``, ``scan``, ``forget``, ``export``/``import``,
``store`` and ``console``.

``memworker reconcile``: consolidate now, by hand, through the same claim and fence as workers.

Safe while workers run: a namespace is consolidated only under its queue lease (a namespace a
worker holds is reported, not touched) and commits go through the database fence and the
unique ledger, so nothing is merged twice. ``--dry-run`` takes no lease and writes nothing:
it merges the pending candidates in memory and prints the diff.

``memworker scan``: run the nightly source scan now, for everyone or for one namespace.

The scan is :func:`worker.service.scan.scan_sources`, the same use case the ``scan_sources``
schedule runs: conversations updated in the window (LangGraph threads), the agents' inbox items
and their direct edits of memory files (with the LangGraph store sink) become candidates, are
queued and marked due now, so the workers merge them within seconds. Per-thread cursors make a
repeated scan harmless: a message already read is never queued twice. ``--dry-run`` reads and
counts, and writes nothing anywhere.

``memworker publish``: deliver the current files again, to every configured sink or one.

For a sink added after memory was merged (its store is empty), or a sink whose copy was lost:
the files are queued in the outbox for the chosen sinks and delivered through the workers'
own delivery path (:mod:`worker.service.publish`). Without ``--sink`` the command needs the
workers' sinks (``MEMWORKER_SINKS``), as every command that writes does.

``memworker forget``: erase a user everywhere — queue, SQL store and sinks.

The erase itself, and the order it keeps, is :mod:`worker.service.transfer`. A namespace a worker
is consolidating right now is not erased (checked at the moment of the erase, after the
confirmation): the command says so, exits 1 and asks to run again once the batch is done.

``memworker export`` / ``memworker import``: one namespace's files and history as JSON.

The document carries every version of every file, the entries, the candidate ledger and pending
approvals (format ``memworker.namespace.v1``). Import validates the whole document before
writing anything — its shape, and then as a merge would (:mod:`worker.service.transfer`: files
are the rendering of their entries, guards, entry ids, versions) — then writes it in one
transaction into a namespace that has no memory yet, and publishes the files. Exporting the
imported namespace gives the same bytes.

Erase is final for import too: a document of a namespace that was erased here (``memworker
forget``), or one imported into such a namespace, is refused naming it, unless the operator
passes ``--restore-erased``; the import then says that it restored an erased namespace, and
what it brought back.

``memworker store``: the LangGraph store's layout — move org items to their own namespaces.

``memworker store migrate-orgs --dry-run`` lists, per org file, where the old layout kept it
(one tuple shared by every org) and where it goes; without ``--dry-run`` each org's files are
published again from SQL to their own tuple and the old shared items are deleted.
"""

from __future__ import annotations

import json
import logging
import sys
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import (
    EXIT_FAILURE,
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    YesOpt,
    confirm,
    console,
    describe_delivery,
    namespace_from,
    now_utc,
    operator_session,
    parse_duration,
    print_json,
    progress_bar,
    progress_of,
    publish_namespaces,
    record_delivery,
    stderr,
)
from worker.errors import ConfigurationError, ErasedNamespace, InvalidOption, NotFound, StoreRefused

if TYPE_CHECKING:
    from worker.models import Namespace
    from worker.runtime.container import Runtime
    from worker.service.consolidate import Reconciled
    from worker.service.publish import DeliveryReport, Republished
    from worker.service.scan import SourceScan
    from worker.service.transfer import Erased, EraseTarget


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
    from worker.service.consolidate import BatchResult
    from worker.types import Outcome

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
    from worker.service.consolidate import reconcile_targets

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
    from worker.service.sweep import probe_model_server

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

    from worker.types import Outcome

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
    from worker.runtime.container import scan_parts
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


#: What publish accepts as its target, for the error when none is given.


def register_publish(app: typer.Typer) -> None:
    app.command("publish")(publish)


def publish(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Every namespace that has memory.")] = False,
    sink: Annotated[
        str | None,
        typer.Option(
            "--sink",
            metavar="NAME",
            help="Only this sink (a name MEMWORKER_SINKS configures, e.g. langgraph). "
            "Default: every configured sink.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Deliver the current memory files again, to every configured sink or one (--sink).

    For a sink added after memory was merged: its store holds nothing until the files are
    published to it. Goes through the outbox, like every commit: safe while workers run.
    """
    from worker.service.publish import republish

    with operator_session(writes=sink is None) as runtime:
        if all_ and (user or assistant or namespace or org):
            raise InvalidOption("give either --all or one namespace (--user/--org/--namespace)")
        chosen = _chosen_sinks(runtime, sink)
        targets = _targets(runtime, None if all_ else (user, assistant, namespace, org))
        done = republish(
            runtime.store,
            {name: runtime.sinks[name] for name in chosen},
            targets,
            progress=progress_of("publish", show=not as_json),
        )
        record_delivery(done.delivery)
        if as_json:
            print_json(_json_published(done, chosen))
            return
        _print_published(runtime, done, chosen)


def _chosen_sinks(runtime: Runtime, sink: str | None) -> list[str]:
    """The sinks to publish to: ``sink`` (refused unless configured here), or every one."""
    configured = list(runtime.sinks)
    if sink is None:
        if not configured:
            raise InvalidOption("no sink is configured (MEMWORKER_SINKS); nothing to publish to")
        return configured
    if sink not in runtime.sinks:
        raise InvalidOption(
            f"--sink {sink!r} is not configured here (MEMWORKER_SINKS gives "
            f"{', '.join(configured) or 'none'}); add it to MEMWORKER_SINKS with its settings"
        )
    return [sink]


def _targets(runtime: Runtime, one: tuple[str | None, ...] | None) -> list[str]:
    """The namespaces to publish: every one with memory (``one`` None), or the one named,
    which must have memory (:class:`NotFound` otherwise)."""
    if one is None:
        return sorted(runtime.store.namespaces())
    user, assistant, namespace, org = one
    ns = namespace_from(user, assistant, namespace, org, accepted=_TARGETS)
    if ns.key not in runtime.store.namespaces(scope=ns.scope.value, user_id=ns.user_id):
        raise NotFound(f"{ns.key} has no memory, so there is nothing to publish; check the id")
    return [ns.key]


def _json_published(done: Republished, sinks: list[str]) -> dict[str, Any]:
    return {
        "namespaces": done.namespaces,
        "sinks": sinks,
        "queued": done.queued,
        "published": done.delivery.delivered,
        "published_to": list(done.delivery.sinks_taken),
        "failed": done.delivery.failed,
        "undelivered": done.delivery.remaining,
        "set_aside": [a.as_dict() for a in done.set_aside + done.delivery.set_aside],
    }


def _print_published(runtime: Runtime, done: Republished, sinks: list[str]) -> None:
    if not done.namespaces and not done.set_aside:
        console.print("no namespace has memory yet; nothing to publish")
        return
    console.print(
        f"{len(done.namespaces)} namespace(s): {done.queued} file deliveries queued for "
        f"{', '.join(sinks)}"
    )
    for aside in done.set_aside:
        console.print(f"  [yellow]set aside[/yellow] {aside.describe()}", highlight=False)
    console.print(describe_delivery(done.delivery, runtime, sinks=sinks))


def register_forget(app: typer.Typer) -> None:
    app.command("forget")(forget)


def forget(
    user: Annotated[str, typer.Option("--user", help="The user to erase.")],
    assistant: Annotated[
        str | None, typer.Option("--assistant", help="Only this assistant's memory of the user.")
    ] = None,
    all_assistants: Annotated[
        bool,
        typer.Option(
            "--all-assistants", help="The user's memory with every assistant, and without one."
        ),
    ] = False,
    org: Annotated[
        str | None,
        typer.Option("--org", help="The user's organisation (the same id in another is kept)."),
    ] = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Erase a user from the queue, the store and the sinks (asks first unless --yes)."""
    from worker.models import validate_id
    from worker.service.transfer import erase, erase_target

    with operator_session(writes=True) as runtime:
        validate_id(user, "user_id")
        if org is not None:
            validate_id(org, "org_id")
        if assistant is not None and all_assistants:
            raise InvalidOption("give --assistant A or --all-assistants, not both")
        target = erase_target(
            runtime.queue.admin,
            runtime.store,
            user,
            assistant=assistant,
            every_assistant=all_assistants,
            org=org,
        )
        keys = target.keys
        if not keys:
            raise NotFound(
                f"user {user} has nothing to forget (no memory, nothing queued); check the id"
            )
        confirm(f"Erase everything memworker holds for {', '.join(keys)}?", yes)
        done = erase(
            runtime.queue.admin,
            runtime.store,
            runtime.sinks,
            keys,
            progress=progress_of("forget", show=not as_json),
        )
        delivery = done.delivery
        if done.busy:
            console.print(
                f"{', '.join(done.busy)} is being consolidated by a worker right now; nothing "
                "of it was erased. Run forget again in a minute, once that batch is done"
            )
        if as_json:
            print_json(
                {
                    "namespaces": [k for k in keys if k not in done.busy],
                    "busy": done.busy,
                    "queued_candidates": done.queued,
                    "sql_rows": done.sql_rows,
                    "sink_deletions": delivery.delivered,
                    "sink_failures": delivery.failed,
                }
            )
        else:
            _print_erased(runtime, target, done)
        if delivery.failed or done.busy:
            raise typer.Exit(EXIT_FAILURE)


def _print_erased(runtime: Runtime, target: EraseTarget, done: Erased) -> None:
    for key in target.keys:
        if key in done.busy:
            continue
        console.print(
            f"{key}: {done.queued[key]} queued candidate(s), {len(done.files[key])} file(s) erased"
        )
    sql = ", ".join(f"{table} {n}" for table, n in done.sql_rows.items()) or "none"
    console.print(f"SQL rows deleted: {sql}")
    console.print(describe_delivery(done.delivery, runtime))
    if target.others:
        console.print(
            f"kept: {', '.join(target.others)} (other assistants); add --all-assistants "
            "to erase those too"
        )


#: The steps of an import a progress bar names: the validated write, then its delivery.
IMPORT_STEPS: Final = ("written", "published")


def register_transfer(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)


def render(document: dict[str, Any]) -> str:
    """The document as stable JSON text (same document, same bytes)."""
    return json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def export(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Print (or write) a namespace's files, history, entries and ledger as JSON."""
    with operator_session() as runtime:
        ns = namespace_from(user, assistant, namespace, org)
        text = render(runtime.store.export_namespace(ns.key))
        if out is None:
            sys.stdout.write(text)
            return
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InvalidOption(f"cannot write {out}: {exc.strerror}") from None
        stderr.print(f"exported {ns.key} to {out}")


def import_(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A `memworker export` document.")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", help="Import under this namespace instead of the file's."),
    ] = None,
    restore_erased: Annotated[
        bool,
        typer.Option(
            "--restore-erased",
            help="Bring back a namespace that was erased (`memworker forget`); without it, "
            "importing an erased namespace is refused: erase is final.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate an export document, then write it in one transaction and publish its files."""
    from worker.models import Namespace
    from worker.service.transfer import import_document
    from worker.store.transfer import describe_erased, parse_document

    with operator_session(writes=True) as runtime:
        data = _load(file)
        try:
            doc = parse_document(data)
        except StoreRefused as exc:  # a bad document is the caller's mistake, not an outage
            raise InvalidOption(f"{file}: {exc}") from None
        key = Namespace.parse(namespace).key if namespace is not None else doc.namespace
        ns = Namespace.parse(key)
        if key in runtime.store.namespaces(scope=ns.scope.value, user_id=ns.user_id):
            raise InvalidOption(
                f"{key} already has memory; nothing was imported. Erase it first "
                "(`memworker forget`, then import with --restore-erased) or import under another "
                "--namespace"
            )
        erased = runtime.store.erased_namespaces(key, doc.namespace)
        if erased and not restore_erased:
            raise InvalidOption(_refused_erased(file, describe_erased(erased)))
        with progress_bar(0 if as_json else len(IMPORT_STEPS), "import") as advance:
            try:
                doc, result, dropped = import_document(
                    runtime.store, data, namespace=key, sinks=tuple(runtime.sinks),
                    now=runtime.store.db_now(), reserved=(runtime.settings.inbox_route,),
                    restore_erased=restore_erased,
                )  # fmt: skip
            except ErasedNamespace as exc:  # erased between the check and the write
                raise InvalidOption(f"{file}: {exc}") from None
            except StoreRefused as exc:
                raise InvalidOption(
                    f"{file}: {exc}; fix the document and import it again"
                ) from None
            advance(IMPORT_STEPS[0])
            delivery = publish_namespaces(runtime, [key])
            advance(IMPORT_STEPS[1])
        if as_json:
            print_json(
                {
                    "namespace": key,
                    "version": result.version,
                    "files": [{"path": p, "versions": n} for p, n in result.files],
                    "entries": len(doc.entries),
                    "ledger_rows": len(doc.ledger),
                    "pending_approvals": len(doc.approvals),
                    "restored_erased": erased,
                    "published": delivery.delivered,
                    "dropped_ledger_rows": dropped,
                }
            )
            return
        if erased:
            console.print(f"restoring erased data (--restore-erased): {describe_erased(erased)}")
        versions = sum(n for _, n in result.files)
        console.print(
            f"imported {key}: {len(result.files)} file(s), {versions} version(s), "
            f"{len(doc.entries)} entries, {len(doc.ledger)} ledger row(s), "
            f"{len(doc.approvals)} pending approval(s)"
        )
        for reason in dropped:
            console.print(f"dropped {reason}")
        console.print(describe_delivery(delivery, runtime))


def _refused_erased(file: Path, erased: str) -> str:
    return (
        f"{file}: {erased}: erase is final, so nothing was imported. To bring it back on "
        "purpose, import again with --restore-erased"
    )


def _load(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidOption(f"{file} does not exist") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidOption(f"{file} is not a JSON export document: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidOption(f"{file} is not a JSON export document (expected an object)")
    return data


def register_store(app: typer.Typer) -> None:
    store = typer.Typer(help="The LangGraph store sink's layout.", no_args_is_help=True)
    store.command("migrate-orgs")(migrate_orgs)
    app.add_typer(store, name="store")


def migrate_orgs(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would move; change nothing.")
    ] = False,
    old_template: Annotated[
        str | None,
        typer.Option(
            "--old-template",
            help="The template every scope used before (a JSON list); default: the layout "
            "before per-org namespaces.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Move org memory from the one namespace all orgs shared to one namespace per org."""
    from worker.connectors.base import ReadsBack
    from worker.connectors.layout import LEGACY_TEMPLATE
    from worker.service.transfer import migrate_org_items

    if old_template is None:
        old_template = json.dumps(list(LEGACY_TEMPLATE))
    try:
        template = json.loads(old_template)
    except json.JSONDecodeError:
        template = None
    if not isinstance(template, list) or not all(isinstance(p, str) for p in template):
        raise InvalidOption(f"--old-template {old_template!r} is not a JSON list of strings")
    with operator_session() as runtime:
        if "langgraph" not in runtime.settings.sinks:
            raise ConfigurationError(
                "the langgraph sink is not configured (MEMWORKER_SINKS); nothing to migrate"
            )
        sink = runtime.sinks["langgraph"]
        if not isinstance(sink, ReadsBack):
            raise ConfigurationError("the langgraph sink cannot read its items back; not migrated")
        moves = migrate_org_items(runtime.store, sink, old_template=template, dry_run=dry_run)
    if as_json:
        print_json(
            [
                {
                    "namespace": m.namespace,
                    "path": m.path,
                    "from": {"namespace": list(m.old_namespace), "key": m.old_key},
                    "to": {"namespace": list(m.new_namespace), "key": m.new_key},
                    "old_item_present": m.old_present,
                    "outcome": m.outcome,
                }
                for m in moves
            ]
        )
        return
    for m in moves:
        console.print(
            f"{m.namespace} {m.path}: {m.old_namespace} {m.old_key} -> "
            f"{m.new_namespace} {m.new_key} ({m.outcome})",
            markup=False,
        )
    console.print(f"{len(moves)} org file(s) {'to move' if dry_run else 'migrated'}")


#: The console's default port; the same as :data:`worker.cli.web.DEFAULT_PORT` (kept here so
#: the command's help does not import the web stack).
DEFAULT_CONSOLE_PORT = 8377


def register_console(app: typer.Typer) -> None:
    app.command("console")(console_command)


def console_command(
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, help="Port on 127.0.0.1 to serve on.")
    ] = DEFAULT_CONSOLE_PORT,
) -> None:
    """Serve the read-only operator console on 127.0.0.1.

    HTTP basic auth: needs MEMWORKER_CONSOLE_PASSWORD; user MEMWORKER_CONSOLE_USER, default
    admin."""
    with operator_session() as runtime:
        try:
            from worker.cli import web
        except ImportError as exc:
            raise ConfigurationError(
                f"the console needs its web stack ({exc.name} is not installed): "
                "pip install 'memworker[console]'"
            ) from None
        web.credentials(runtime)  # refuses before anything listens
        console.print(
            f"memworker console on http://{web.HOST}:{port}/ (read-only; Ctrl-C stops it)"
        )
        web.serve(runtime, port=port)
