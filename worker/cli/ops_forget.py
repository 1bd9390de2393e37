"""``memworker forget``: erase a user everywhere — queue, SQL store and sinks.

The erase itself, and the order it keeps, is :mod:`worker.service.erase`. A namespace a worker
is consolidating right now is not erased (checked at the moment of the erase, after the
confirmation): the command says so, exits 1 and asks to run again once the batch is done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from worker.cli.common import print_json
from worker.cli.errors import EXIT_FAILURE
from worker.cli.ops_support import (
    JsonOpt,
    YesOpt,
    confirm,
    console,
    describe_delivery,
    operator_session,
)
from worker.cli.progress import progress_of
from worker.errors import InvalidOption, NotFound

if TYPE_CHECKING:
    from worker.runtime.container import Runtime
    from worker.service.erase import Erased, EraseTarget


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
    from worker.service.erase import erase, erase_target

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
