"""``memworker forget``: erase a user everywhere — queue, SQL store and sinks.

Order matters: the queue first (so no batch of the user is merged back afterwards), then SQL
in one transaction (which queues an erase tombstone per file and sink), then the tombstones are
delivered (the sinks delete their copies; a delivered tombstone is itself deleted). A namespace
a worker is consolidating right now is not erased: its commit could land after the erase, so
the command stops and asks to run again once the lease ends.
"""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer

from worker.cli.common import print_json
from worker.cli.errors import EXIT_FAILURE
from worker.cli.ops_support import (
    JsonOpt,
    YesOpt,
    confirm,
    console,
    describe_delivery,
    now_utc,
    operator_session,
    publish,
)
from worker.errors import InvalidCandidate, MemworkerError, NotFound
from worker.models import Namespace, Scope, validate_id
from worker.runtime.container import Runtime
from worker.sinks.files import FilesSink


def register(app: typer.Typer) -> None:
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
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Erase a user from the queue, the store and the sinks (asks first unless --yes)."""
    with operator_session() as runtime:
        validate_id(user, "user_id")
        if assistant is not None and all_assistants:
            raise InvalidCandidate("give --assistant A or --all-assistants, not both")
        keys = _namespaces(runtime, user, assistant, all_assistants)
        if not keys:
            raise NotFound(
                f"user {user} has nothing to forget (no memory, nothing queued); check the id"
            )
        busy = [k for k in keys if runtime.queue.namespace_state(k).leased]
        if busy:
            console.print(
                f"{', '.join(busy)} is being consolidated by a worker right now; nothing was "
                "erased. Run forget again in a minute, once that batch is done"
            )
            raise typer.Exit(EXIT_FAILURE)
        confirm(f"Erase everything memworker holds for {', '.join(keys)}?", yes)
        files = {k: [f.path for f in runtime.store.list_files(k)] for k in keys}
        queued = {k: runtime.queue.purge_namespace(k) for k in keys}
        report = runtime.store.erase_namespaces(keys, now=now_utc(), sinks=tuple(runtime.sinks))
        delivery = publish(runtime)
        _prune_empty_dirs(runtime, files)
        rows = {table: n for table, n in sorted(report.deleted.items()) if n}
        if as_json:
            print_json(
                {
                    "namespaces": keys,
                    "queued_candidates": queued,
                    "sql_rows": rows,
                    "sink_deletions": delivery.delivered,
                    "sink_failures": delivery.failed,
                }
            )
        else:
            others = _other_namespaces(runtime, user, keys) if not all_assistants else []
            for key in keys:
                console.print(
                    f"{key}: {queued[key]} queued candidate(s), {len(files[key])} file(s) erased"
                )
            sql = ", ".join(f"{table} {n}" for table, n in rows.items()) or "none"
            console.print(f"SQL rows deleted: {sql}")
            console.print(describe_delivery(delivery, runtime))
            if others:
                console.print(
                    f"kept: {', '.join(others)} (other assistants); add --all-assistants to "
                    "erase those too"
                )
        if delivery.failed:
            raise typer.Exit(EXIT_FAILURE)


def _namespaces(runtime: Runtime, user: str, assistant: str | None, every: bool) -> list[str]:
    """The user's namespace keys that the store or the queue knows, per the flags."""
    if not every:
        key = Namespace.for_user(user, assistant_id=assistant).key
        known = key in runtime.store.namespaces(scope="user", user_id=user)
        return [key] if known or runtime.queue.namespace_state(key).known else []
    return _all_of_user(runtime, user)


def _other_namespaces(runtime: Runtime, user: str, erased: list[str]) -> list[str]:
    return [k for k in _all_of_user(runtime, user) if k not in erased]


def _all_of_user(runtime: Runtime, user: str) -> list[str]:
    found = set(runtime.store.namespaces(scope="user", user_id=user))
    for key in runtime.queue.namespaces():
        with contextlib.suppress(MemworkerError):
            ns = Namespace.parse(key)
            if ns.scope is Scope.USER and ns.user_id == user:
                found.add(key)
    return sorted(found)


def _prune_empty_dirs(runtime: Runtime, files: dict[str, list[str]]) -> None:
    """Remove the folders a files sink kept for the erased files, when they are now empty.

    Folder names carry the user id, so an empty folder is still a trace of the user.
    """
    for sink in runtime.sinks.values():
        if not isinstance(sink, FilesSink):
            continue
        root = sink.root.resolve()
        for key, paths in files.items():
            for path in paths:
                folder = sink.path_for(key, path).resolve().parent
                while folder != root and root in folder.parents:
                    with contextlib.suppress(OSError):  # not empty, or already gone
                        folder.rmdir()
                    if folder.exists():
                        break
                    folder = folder.parent
