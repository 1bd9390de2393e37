"""Reading and reconciling memory: ``reconcile``, ``show``, ``history``, ``diff``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from worker.cli.common import namespace_from, open_runtime, print_json
from worker.cli.errors import EXIT_FAILURE, cli_errors
from worker.consolidation.pipeline import BatchResult
from worker.errors import NotFound

console = Console(highlight=False)

UserOpt = Annotated[str | None, typer.Option("--user", help="User id.")]
AssistantOpt = Annotated[str | None, typer.Option("--assistant", help="Assistant id.")]
NamespaceOpt = Annotated[
    str | None, typer.Option("--namespace", help="A namespace key, e.g. user:u1 or agent:a1.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def register(app: typer.Typer) -> None:
    app.command("reconcile")(reconcile)
    app.command("show")(show)
    app.command("history")(history)


def reconcile(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    all_: Annotated[bool, typer.Option("--all", help="Every namespace with pending work.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the diff; commit nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Consolidate now what is pending, through the same claim and fence as the workers."""
    with cli_errors(), open_runtime() as runtime:
        if all_:
            targets = sorted(runtime.queue.namespaces())
        else:
            targets = [namespace_from(user, assistant, namespace).key]
        results: list[BatchResult] = []
        for key in targets:
            claim = runtime.queue.claim_namespace(key)
            if claim is None:
                results.append(BatchResult(key, "nothing_new"))
                continue
            results.append(
                runtime.pipeline.consolidate(claim, trigger="reconcile", dry_run=dry_run)
            )
        if as_json:
            print_json([_result_json(r) for r in results])
        else:
            for result in results:
                _print_result(result)
        if any(r.outcome in ("failed", "dead", "stale") for r in results):
            raise typer.Exit(EXIT_FAILURE)


def show(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    path: Annotated[str | None, typer.Option("--path", help="One memory file.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a namespace's current memory files."""
    from worker.models import normalise_path

    with cli_errors(), open_runtime() as runtime:
        ns = namespace_from(user, assistant, namespace)
        files = runtime.store.current_files(ns.key)
        if path is not None:
            wanted = normalise_path(path)
            if wanted not in files:
                raise NotFound(f"{ns.key} has no file {wanted}; `memworker show` lists its files")
            files = {wanted: files[wanted]}
        if as_json:
            print_json({"namespace": ns.key, "files": files})
            return
        if not files:
            console.print(
                f"{ns.key} has no memory files yet (pending candidates: `memworker status`)"
            )
        for file_path, content in sorted(files.items()):
            console.rule(f"{ns.key} {file_path}")
            console.print(content, markup=False)


def history(
    path: Annotated[str, typer.Option("--path", help="The memory file.")],
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List every version of one memory file (newest last)."""
    from worker.models import normalise_path

    with cli_errors(), open_runtime() as runtime:
        ns = namespace_from(user, assistant, namespace)
        versions = runtime.store.file_history(ns.key, normalise_path(path))
        if as_json:
            print_json([_version_json(v) for v in versions])
            return
        table = Table(title=f"{ns.key} {normalise_path(path)}")
        for column in ("version", "created", "author", "run", "lines"):
            table.add_column(column)
        for v in versions:
            table.add_row(
                str(v.version), v.created_at.isoformat(timespec="seconds"), v.author,
                str(v.run_id or ""), str(v.content.count("\n")),
            )  # fmt: skip
        console.print(table)


def _version_json(v: Any) -> dict[str, Any]:
    return {
        "version": v.version,
        "created_at": v.created_at.isoformat(),
        "author": v.author,
        "run_id": v.run_id,
        "content": v.content,
        "diff": v.diff,
    }


def _result_json(r: BatchResult) -> dict[str, Any]:
    return {
        "namespace": r.namespace,
        "outcome": r.outcome,
        "candidates": r.candidates,
        "skipped": r.skipped,
        "version": r.version,
        "counts": r.counts,
        "error": r.error,
        "files": [{"path": f.path, "diff": f.diff, "content": f.content} for f in r.files],
    }


def _print_result(r: BatchResult) -> None:
    style = {"committed": "green", "dry_run": "yellow", "nothing_new": "dim"}.get(r.outcome, "red")
    summary = ", ".join(f"{k} {v}" for k, v in sorted(r.counts.items()) if v) or "no changes"
    console.print(
        f"[{style}]{r.namespace}: {r.outcome.replace('_', ' ')}[/{style}] "
        f"({r.candidates} candidates; {summary})"
    )
    if r.error:
        console.print(f"  [red]{r.error}[/red]", markup=True)
    for change in r.files:
        console.print(Syntax(change.diff or "(no textual change)", "diff", theme="ansi_dark"))
