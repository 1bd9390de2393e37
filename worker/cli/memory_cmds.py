"""Reading memory and its history: ``show``, ``history``, ``diff``, ``rollback``.

History is append-only: a rollback adds a new version equal to an old one, and is published
to the sinks like any other version. (``reconcile`` lives in :mod:`worker.cli.ops_reconcile`.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.errors import stderr
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    YesOpt,
    confirm,
    console,
    describe_delivery,
    operator_session,
    record_delivery,
    require_known,
)
from worker.errors import InvalidOption, NotFound

if TYPE_CHECKING:
    from collections.abc import Callable

    from worker.models import Namespace
    from worker.store.memory import MemoryStore
    from worker.store.records import FileVersionInfo

PathOpt = Annotated[str, typer.Option("--path", help="The memory file, e.g. preferences.")]

#: Under ``history``: the two counters, in the words ``reconcile`` uses too.
HISTORY_CAPTION: Final = (
    "version counts this file's changes; namespace revision counts the namespace's commits"
)


def register_memory(app: typer.Typer) -> None:
    app.command("show")(show)
    app.command("history")(history)
    app.command("diff")(diff)
    app.command("rollback")(rollback)


def show(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    path: Annotated[str | None, typer.Option("--path", help="One memory file.")] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="TIME",
            help="Show the files as they were then (ISO 8601, e.g. 2026-12-01T09:00Z; UTC "
            "without an offset).",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a namespace's memory files: as they are now, or as they were at --as-of."""
    from rich.rule import Rule

    from worker.models import normalise_path

    with operator_session() as runtime:
        at = None if as_of is None else parse_time(as_of, option="--as-of")
        ns = namespace_from(user, assistant, namespace, org)
        if at is not None:
            _show_as_of(runtime.store, ns, at, path, as_json)
            return
        files = runtime.store.current_files(ns.key)
        others = other_namespaces(runtime.store.namespaces, ns)
        if not files:
            try:
                require_known(runtime, ns)
            except NotFound as exc:
                if not others:
                    raise
                raise NotFound(f"{exc}; {others_hint(ns, others)}") from None
        if path is not None:
            wanted = normalise_path(path)
            if wanted not in files:
                raise NotFound(f"{ns.key} has no file {wanted}; `memworker show` lists its files")
            files = {wanted: files[wanted]}
        if as_json:
            print_json({"namespace": ns.key, "files": files, "other_namespaces": others})
            return
        if not files:
            console.print(
                f"{ns.key} has no memory files yet (pending candidates: `memworker status`)"
            )
        for file_path, content in sorted(files.items()):
            title = f"{ns.key} {file_path}"
            console.print(Rule(title), width=console.rule_width(title))
            # The file's bytes as the sinks publish them: no markup, emoji codes or wrapping.
            console.print(content, markup=False, emoji=False, soft_wrap=True, end="")
        if others:  # on stderr: stdout stays the files
            stderr.print(others_hint(ns, others), markup=False, soft_wrap=True)


def parse_time(text: str, *, option: str) -> datetime:
    """An ISO 8601 time as an aware UTC datetime (``Z`` accepted; no offset means UTC).

    >>> parse_time("2026-12-01T09:00Z", option="--as-of").isoformat()
    '2026-12-01T09:00:00+00:00'
    >>> parse_time("yesterday", option="--as-of")
    Traceback (most recent call last):
    ...
    worker.errors.InvalidOption: --as-of 'yesterday' is not an ISO 8601 time, e.g. \
2026-12-01T09:00:00Z
    """
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidOption(
            f"{option} {text!r} is not an ISO 8601 time, e.g. 2026-12-01T09:00:00Z"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _show_as_of(
    store: MemoryStore, ns: Namespace, at: datetime, path: str | None, as_json: bool
) -> None:
    """``show --as-of``: each file at the version that was current at ``at``."""
    from rich.rule import Rule

    from worker.models import normalise_path

    versions = store.files_as_of(ns.key, at)
    if not versions and not store.current_files(ns.key):
        raise NotFound(f"{ns.key} is unknown: it has no memory files (`memworker status`)")
    if path is not None:
        wanted = normalise_path(path)
        if wanted not in versions:
            raise NotFound(f"{ns.key} had no file {wanted} at {at.isoformat()}")
        versions = {wanted: versions[wanted]}
    if as_json:
        print_json(
            {
                "namespace": ns.key,
                "as_of": at.isoformat(),
                "files": {p: v.content for p, v in versions.items()},
                "versions": {p: _version_json(v) for p, v in versions.items()},
            }
        )
        return
    if not versions:
        console.print(f"{ns.key} had no memory files yet at {at.isoformat()}")
    for file_path, v in sorted(versions.items()):
        title = (
            f"{ns.key} {file_path} version {v.version} "
            f"({v.created_at.isoformat(timespec='seconds')}, {v.author})"
        )
        console.print(Rule(title), width=console.rule_width(title))
        console.print(v.content, markup=False, emoji=False, soft_wrap=True, end="")


def other_namespaces(listed: Callable[..., list[str]], ns: Namespace) -> list[str]:
    """The user's other namespaces with memory (one per assistant, and the one without):
    ``listed`` is the store's ``namespaces``. None for a namespace that is not a user's."""
    if ns.user_id is None:
        return []
    return sorted(k for k in listed(scope="user", user_id=ns.user_id) if k != ns.key)


def others_hint(ns: Namespace, others: list[str]) -> str:
    """Where else the user ``ns`` names has memory, and how to show it.

    >>> from worker.models import Namespace
    >>> print(others_hint(Namespace.for_user("u1"), ["user:u1:bot", "user:u1:tutor"]))
    ... # doctest: +NORMALIZE_WHITESPACE
    u1 also has memory in user:u1:bot, user:u1:tutor (show one: memworker show --namespace
    user:u1:bot)
    """
    return (
        f"{ns.user_id} also has memory in {', '.join(others)} "
        f"(show one: memworker show --namespace {others[0]})"
    )


def history(
    path: PathOpt,
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List every version of one memory file (oldest first), with who wrote it.

    ``version`` counts this file's own changes; ``revision`` is the namespace revision that
    wrote it (one counter per namespace, over all its files: what ``reconcile`` reports).
    """
    from rich.table import Table

    from worker.models import normalise_path

    with operator_session() as runtime:
        ns = namespace_from(user, assistant, namespace, org)
        wanted = normalise_path(path)
        versions = runtime.store.file_history(ns.key, wanted)
        if as_json:
            print_json([_version_json(v) for v in versions])
            return
        table = Table(
            title=f"{ns.key} {wanted}",
            caption=HISTORY_CAPTION,
        )
        for column in ("version", "namespace revision", "created", "author", "run", "change"):
            table.add_column(column)
        for v in versions:
            table.add_row(
                str(v.version), str(v.namespace_version),
                v.created_at.isoformat(timespec="seconds"), v.author, str(v.run_id or ""),
                _change(v.diff),
            )  # fmt: skip
        console.print(table)


def diff(
    version_a: Annotated[int, typer.Argument(metavar="V1", help="The older version.")],
    version_b: Annotated[
        int | None, typer.Argument(metavar="V2", help="The newer version (default: current).")
    ] = None,
    *,
    path: PathOpt,
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The unified diff of one memory file between two of its versions."""
    from rich.syntax import Syntax

    from worker.models import normalise_path
    from worker.store.files import unified_diff

    with operator_session() as runtime:
        ns = namespace_from(user, assistant, namespace, org)
        wanted = normalise_path(path)
        old = runtime.store.file_version(ns.key, wanted, version_a)
        if version_b is None:
            new = runtime.store.file_history(ns.key, wanted)[-1]
        else:
            new = runtime.store.file_version(ns.key, wanted, version_b)
        text = unified_diff(wanted, old.content, new.content)
        if as_json:
            print_json(
                {
                    "namespace": ns.key,
                    "path": wanted,
                    "from": old.version,
                    "to": new.version,
                    "diff": text,
                }
            )
            return
        console.print(
            f"{ns.key} {wanted}: version {old.version} ({old.author}) -> "
            f"version {new.version} ({new.author})"
        )
        console.print(Syntax(text or "(no difference)", "diff", theme="ansi_dark"))


def rollback(
    path: PathOpt,
    to: Annotated[int, typer.Option("--to", help="The version to bring back.")],
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    yes: YesOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Add a new version equal to an old one (history is kept), then publish it."""
    from rich.syntax import Syntax

    from worker.models import normalise_path
    from worker.service.rollback import preview_rollback
    from worker.service.rollback import rollback as rollback_file

    with operator_session(writes=True) as runtime:
        ns = namespace_from(user, assistant, namespace, org)
        wanted = normalise_path(path)
        planned = preview_rollback(runtime.store, ns.key, wanted, to)
        if not as_json:
            console.print(Syntax(planned.diff or "(no difference)", "diff", theme="ansi_dark"))
        confirm(
            f"Add version {planned.current_version + 1} of {ns.key} {wanted} equal to version "
            f"{to}?",
            yes,
        )
        done = rollback_file(
            runtime.store, runtime.sinks, ns.key, wanted, to=to, now=runtime.store.db_now()
        )
        new_version, delivery = done.version, record_delivery(done.delivery)
        if as_json:
            print_json(
                {
                    "namespace": ns.key,
                    "path": wanted,
                    "rolled_back_to": to,
                    "version": new_version,
                    "published": delivery.delivered,
                }
            )
            return
        console.print(
            f"{ns.key} {wanted}: version {new_version} now equals version {to} "
            f"(versions 1-{new_version - 1} are kept)"
        )
        console.print(describe_delivery(delivery, runtime))


def _change(diff_text: str) -> str:
    """``+2 -1``: lines added and removed by a version."""
    lines = diff_text.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return f"+{added} -{removed}"


def _version_json(v: FileVersionInfo) -> dict[str, Any]:
    return {
        "version": v.version,
        "namespace_revision": v.namespace_version,
        "created_at": v.created_at.isoformat(),
        "author": v.author,
        "run_id": v.run_id,
        "content": v.content,
        "diff": v.diff,
    }
