"""``memworker dlq``: batches that failed ``max_attempts`` times, kept until an operator acts.

``list`` shows each dead-lettered namespace with its last error; ``retry`` brings one back (or
``--all``, optionally only those whose last error matches) with a fresh attempt count, due now
so the next sweep merges it; ``drop`` deletes its pending candidates for good, after
confirmation.
"""

from __future__ import annotations

from typing import Annotated

import typer

from worker.cli.common import print_json
from worker.cli.ops_support import JsonOpt, YesOpt, confirm, console, operator_session
from worker.cli.progress import progress_of
from worker.errors import InvalidOption

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
    from worker.service.dead_letters import retry_dead_letter, retry_dead_letters

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
    from worker.service.dead_letters import drop_dead_letter

    with operator_session() as runtime:
        key = Namespace.parse(namespace).key

        def ask(pending: int) -> None:
            confirm(f"Delete the {pending} pending candidate(s) of {key} for good?", yes)

        dropped = drop_dead_letter(runtime.queue.admin, key, confirm=ask)
        console.print(f"{key}: dropped {dropped} candidate(s)")
