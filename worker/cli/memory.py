"""Memory from a terminal: ``show``, ``history``, ``diff``, ``rollback``, ``search``, ``why``,
``put`` and ``approvals``.

Reading memory and its history: ``show``, ``history``, ``diff``, ``rollback``.

History is append-only: a rollback adds a new version equal to an old one, and is published
to the sinks like any other version. (``reconcile`` lives in :mod:`worker.cli.ops`.)

What the assistant remembers and why: ``search``, ``why`` and ``candidate``.

Thin callers of the deployment's search (:class:`~worker.service.search.SqlMemorySearch`
as the runtime builds it: hybrid with ``MEMWORKER_EMBEDDINGS``) and of
:mod:`worker.service.operator`. They only read.

``memworker put``: operators write shared, read-only memory (org policies, agent notes).

The file becomes operator-owned: the consolidator never edits it (changes it proposes wait in
``memworker approvals``), and the hot path cannot write org scope at all. It is versioned and
published like any other file.

``memworker approvals``: changes to read-only or sensitive files, waiting for an operator.

Approving re-validates the waiting operation against the namespace as it is *now* and commits
it as a new version (see :mod:`worker.service.operator`), then publishes it. If it no longer
applies (say the entry it replaces is gone), nothing is written and the approval stays
pending: reject it instead.
"""

from __future__ import annotations

import dataclasses
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import (
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
    operator_name,
    operator_session,
    print_json,
    record_delivery,
    require_known,
    stderr,
)
from worker.errors import InvalidCandidate, InvalidOption, NotFound

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.text import Text

    from worker.models import Namespace
    from worker.service.operator import CandidateFate
    from worker.store.memory import MemoryStore
    from worker.store.records import ApprovalInfo, EntryProvenance, FileVersionInfo, LedgerInfo


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
    from worker.store.commit import unified_diff

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
    from worker.service.operator import preview_rollback
    from worker.service.operator import rollback as rollback_file

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


#: Hits ``search`` prints by default, and the most it accepts.
DEFAULT_SEARCH_LIMIT: Final = 10
MAX_SEARCH_LIMIT: Final = 100


def register_why(app: typer.Typer) -> None:
    app.command("search")(search)
    app.command("why")(why)
    app.command("candidate")(candidate)


def search(
    query: Annotated[str, typer.Argument(metavar="QUERY", help="Words to look for.")],
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    limit: Annotated[
        int, typer.Option("--limit", help=f"Most hits (1-{MAX_SEARCH_LIMIT}).")
    ] = DEFAULT_SEARCH_LIMIT,
    as_json: JsonOpt = False,
) -> None:
    """Search a namespace's memory as the agents' search_memory tool does.

    Hybrid (vector and full text) with the deployment's embeddings; full text with
    MEMWORKER_EMBEDDINGS=none."""
    from rich.table import Table

    with operator_session() as runtime:
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise InvalidOption(f"--limit must be between 1 and {MAX_SEARCH_LIMIT}, not {limit}")
        ns = namespace_from(user, assistant, namespace, org)
        searcher = runtime.memory_search
        mode = "hybrid" if searcher.embedder is not None else "full text"
        hits = searcher.search_entries(ns.key, query, limit)
        if as_json:
            print_json(
                {
                    "namespace": ns.key,
                    "query": query,
                    "mode": mode,
                    "hits": [{"entry_id": e.id, "path": e.path, "text": e.text} for e in hits],
                }
            )
            return
        if not hits:
            console.print(f"nothing in {ns.key} matches {query!r} ({mode} search)", markup=False)
            return
        table = Table(title=f"{ns.key}: {query}", caption=f"{mode} search, best first")
        for column in ("#", "path", "memory", "entry"):
            table.add_column(column)
        for rank, e in enumerate(hits, start=1):
            table.add_row(*_cells(str(rank), e.path, _plain(e.text), e.id))
        console.print(table)


def why(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="A memory, or words of it.")],
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    limit: Annotated[int, typer.Option("--limit", help="Most entries explained.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Why the assistant remembers TEXT: the matching entries and what made each.

    Each entry with the candidates that made, confirmed or retired it (ids, traces, sources,
    threads, times) and the plan operation that wrote it."""
    from worker.service.operator import explain

    with operator_session() as runtime:
        ns = namespace_from(user, assistant, namespace, org)
        found = explain(runtime.store, runtime.memory_search, ns.key, text, limit=limit)
        if as_json:
            print_json({"namespace": ns.key, "entries": [entry_json(p) for p in found]})
            return
        if not found:
            console.print(f"no entry of {ns.key} matches {text!r}", markup=False)
            return
        for p in found:
            _print_provenance(p)


def candidate(
    candidate_id: Annotated[str, typer.Argument(metavar="ID", help="The candidate's id.")],
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What became of one candidate, from the queue to the entry it made.

    Queued, due, leased, merged (into which entry, at which revision), confirmed, rejected and
    why, dead-lettered or erased."""
    from worker.service.operator import candidate_fate

    with operator_session() as runtime:
        named = any(x is not None for x in (user, assistant, namespace, org))
        ns = namespace_from(user, assistant, namespace, org).key if named else None
        fate = candidate_fate(runtime.store, runtime.queue, candidate_id, namespace=ns)
        if as_json:
            print_json(fate_json(fate))
            return
        console.print(f"candidate {fate.candidate_id}: {fate.state}", markup=False)
        console.print(f"  {fate.detail}", markup=False, soft_wrap=True)
        if fate.queued is not None:
            c = fate.queued.candidate
            console.print(
                f"  said {c.created_at.isoformat(timespec='seconds')} via {c.source}"
                f"{' in thread ' + c.thread_id if c.thread_id else ''} (trace {c.trace_id}): "
                f"{_plain(c.text)}",
                markup=False,
                soft_wrap=True,
            )
        for row in fate.ledger:
            console.print(f"  {_ledger_line(row)}", markup=False, soft_wrap=True)
        for p in fate.entries:
            console.print(
                f"  entry {p.entry.id} now: {_entry_state(p)}: {_plain(p.entry.text)} "
                f"(memworker why shows its candidates)",
                markup=False,
                soft_wrap=True,
            )


# --- output ---------------------------------------------------------------------------------
def _cells(*values: str) -> list[Text]:
    """Table cells shown as written: stored text is user input, never Rich markup."""
    from rich.text import Text

    return [Text(v) for v in values]


def _plain(text: str) -> str:
    """One line of stored text for a table cell (newlines shown as spaces)."""
    return " ".join(text.split())


def _ledger_line(row: LedgerInfo) -> str:
    said = row.said_at.isoformat(timespec="seconds") if row.said_at else "unknown"
    where = row.source or "unknown source"
    if row.thread_id:
        where += f", thread {row.thread_id}"
    rev = f" at revision {row.revision}" if row.revision is not None else ""
    op = row.operation or "unrecorded operation"
    because = f" ({row.reason})" if row.reason else ""
    return (
        f"{row.candidate_id} {row.outcome}{rev} by {op}{because}; said {said} via {where}, "
        f"trace {row.trace_id}; merged {row.recorded_at.isoformat(timespec='seconds')}"
    )


def _entry_state(p: EntryProvenance) -> str:
    """``active``, or when and by what an entry was retired."""
    if p.entry.active:
        return "active"
    state = f"retired at revision {p.invalidated_revision}"
    if p.entry.superseded_by:
        state += f", superseded by {p.entry.superseded_by}"
    return state


def _print_provenance(p: EntryProvenance) -> None:
    """One entry: a header line, its text, and a table of the candidates behind it."""
    from rich.table import Table

    e = p.entry
    version = f", file version {p.file_version}" if p.file_version is not None else ""
    writer = next((r.operation for r in p.ledger if r.entry_id == e.id and r.operation), None)
    by = f" by {writer}" if writer else ""
    console.print(
        f"{p.namespace} {e.path} entry {e.id}: {_entry_state(p)}; added at revision "
        f"{p.added_revision}{version}{by}; said {e.confirmations} time(s)",
        markup=False,
        soft_wrap=True,
    )
    console.print(f"  {_plain(e.text)}", markup=False, emoji=False, soft_wrap=True)
    table = Table()
    for column in ("candidate", "outcome", "operation", "revision", "source", "thread",
                   "trace", "said", "merged"):  # fmt: skip
        table.add_column(column)
    for r in p.ledger:
        table.add_row(*_cells(
            r.candidate_id, r.outcome, r.operation or "", _opt(r.revision), r.source or "",
            r.thread_id or "", r.trace_id, _time(r.said_at), _time(r.recorded_at),
        ))  # fmt: skip
    console.print(table)


def _opt(value: int | None) -> str:
    return "" if value is None else str(value)


def _time(value: Any) -> str:
    return "" if value is None else str(value.isoformat(timespec="seconds"))


def _row_json(row: LedgerInfo) -> dict[str, Any]:
    """A ledger row as JSON, its times in ISO 8601 (as every ``--json`` writes them)."""
    return {
        k: v.isoformat() if isinstance(v, datetime) else v
        for k, v in dataclasses.asdict(row).items()
    }


def entry_json(p: EntryProvenance) -> dict[str, Any]:
    """An entry's provenance as JSON (``why --json``; the console's API shares it)."""
    return {
        "namespace": p.namespace,
        "entry": p.entry.model_dump(mode="json"),
        "active": p.entry.active,
        "added_revision": p.added_revision,
        "invalidated_revision": p.invalidated_revision,
        "file_version": p.file_version,
        "candidates": [_row_json(r) for r in p.ledger],
    }


def fate_json(fate: CandidateFate) -> dict[str, Any]:
    """A candidate's fate as JSON (``candidate --json``)."""
    queued = None
    if fate.queued is not None:
        q = fate.queued
        queued = {
            "namespace": q.namespace,
            "stream_id": q.stream_id,
            "candidate": q.candidate.model_dump(mode="json"),
            "due_at": q.due_at.isoformat() if q.due_at is not None else None,
            "attempts": q.attempts,
            "last_error": q.last_error,
        }
    return {
        "candidate_id": fate.candidate_id,
        "state": fate.state,
        "detail": fate.detail,
        "ledger": [_row_json(r) for r in fate.ledger],
        "queued": queued,
        "entries": [entry_json(p) for p in fate.entries],
    }


def register_put(app: typer.Typer) -> None:
    app.command("put")(put)


def put(
    file: Annotated[
        str, typer.Argument(metavar="FILE", help="Markdown file to store ('-' reads stdin).")
    ],
    path: Annotated[str, typer.Option("--path", help="Memory path, e.g. policies/compliance.md.")],
    org: Annotated[str | None, typer.Option("--org", help="Organisation id.")] = None,
    assistant: Annotated[
        str | None, typer.Option("--assistant", help="Assistant id (agent scope).")
    ] = None,
    author: Annotated[
        str | None, typer.Option("--author", help="Recorded author (default: your login).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write an operator-owned memory file for an org or an assistant, then publish it."""
    from worker.models import Namespace, normalise_path
    from worker.service.operator import put_file
    from worker.types import refuse_reserved

    with operator_session(writes=True) as runtime:
        if (org is None) == (assistant is None):
            raise InvalidOption("name exactly one owner: --org ID or --assistant A")
        ns = Namespace.for_org(org) if org is not None else Namespace.for_agent(str(assistant))
        wanted = normalise_path(path)
        try:
            refuse_reserved(wanted, f"--path {path!r}", (runtime.settings.inbox_route,))
        except InvalidCandidate as exc:
            raise InvalidOption(str(exc)) from None
        content = _read(file, limit=runtime.settings.file_budget_bytes)
        who = f"operator:{author}" if author and not author.startswith("operator:") else author
        done = put_file(
            runtime.store,
            runtime.sinks,
            namespace=ns.key,
            path=wanted,
            content=content,
            author=who or operator_name(),
        )
        delivery = record_delivery(done.delivery)
        if as_json:
            print_json(
                {
                    "namespace": ns.key,
                    "path": wanted,
                    "version": done.version,
                    "published": delivery.delivered,
                }
            )
            return
        console.print(
            f"{ns.key} {wanted}: version {done.version} written (read-only for the workers)"
        )
        console.print(describe_delivery(delivery, runtime))


def _read(file: str, *, limit: int) -> str:
    """The file's text, read no further than ``limit`` bytes (so ``/dev/zero`` or a huge file
    is refused at once rather than read to the end); an empty file is refused too."""
    try:
        if file == "-":
            raw = sys.stdin.buffer.read(limit + 1)
        else:
            with Path(file).open("rb") as handle:
                raw = handle.read(limit + 1)
    except FileNotFoundError:
        raise InvalidOption(f"{file} does not exist; give the Markdown file to store") from None
    except OSError as exc:
        raise InvalidOption(f"cannot read {file}: {exc.strerror}") from None
    if len(raw) > limit:
        raise InvalidOption(
            f"{file} is over {limit} bytes; memory files are at most {limit} "
            "(MEMWORKER_FILE_BUDGET_BYTES)"
        )
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidOption(f"{file} is not UTF-8 text; memory files are Markdown") from None
    if not content.strip():
        raise InvalidOption(f"{file} is empty; give the Markdown to store")
    return content


IdArg = Annotated[int, typer.Argument(metavar="ID", help="The approval id (`approvals list`).")]
ByOpt = Annotated[str | None, typer.Option("--by", help="Who decides (default: operator:<login>).")]


def register_approvals(app: typer.Typer) -> None:
    approvals = typer.Typer(
        help="Changes waiting for an operator: list, approve, reject.", no_args_is_help=True
    )
    approvals.command("list")(list_pending)
    approvals.command("approve")(approve)
    approvals.command("reject")(reject)
    app.add_typer(approvals, name="approvals")


def list_pending(
    user: UserOpt = None,
    assistant: AssistantOpt = None,
    namespace: NamespaceOpt = None,
    org: OrgOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pending approvals, oldest first (of one namespace, or all)."""
    from rich.table import Table

    with operator_session() as runtime:
        key = None
        if user or assistant or namespace or org:
            key = namespace_from(user, assistant, namespace, org).key
        pending = runtime.store.pending_approvals(namespace=key)
        if as_json:
            print_json([_json(a) for a in pending])
            return
        if not pending:
            console.print("no approvals waiting")
            return
        table = Table(title="waiting for approval")
        for column in ("id", "namespace", "path", "operation", "since"):
            table.add_column(column, overflow="fold")
        for a in pending:
            table.add_row(
                str(a.id), a.namespace, a.path, _describe(a.operation),
                a.created_at.isoformat(timespec="seconds"),
            )  # fmt: skip
        console.print(table)


def approve(approval_id: IdArg, by: ByOpt = None, as_json: JsonOpt = False) -> None:
    """Apply a waiting operation as a new version of its file, then publish it."""
    from worker.service.operator import approve as approve_change

    with operator_session(writes=True) as runtime:
        done = approve_change(
            runtime.store,
            runtime.settings.for_consolidation,
            runtime.sinks,
            approval_id,
            by=by or operator_name(),
        )
        info, result = done.info, done.result
        delivery = record_delivery(done.delivery)
        if as_json:
            print_json(
                {
                    **_json(info),
                    "status": "approved",
                    "version": result.version,
                    "files": [{"path": p, "version": v} for p, v in result.files],
                    "published": delivery.delivered,
                }
            )
            return
        files = ", ".join(f"{p} version {v}" for p, v in result.files) or "no file changed"
        console.print(f"approval {info.id} approved and applied to {info.namespace}: {files}")
        console.print(describe_delivery(delivery, runtime))


def reject(approval_id: IdArg, by: ByOpt = None, as_json: JsonOpt = False) -> None:
    """Drop a waiting operation; nothing is written to the file."""
    from worker.service.operator import reject as reject_change

    with operator_session() as runtime:
        info = reject_change(runtime.store, approval_id, by=by or operator_name())
        if as_json:
            print_json({**_json(info), "status": "rejected"})
            return
        console.print(f"approval {info.id} rejected; {info.namespace} {info.path} is unchanged")


def _describe(operation: dict[str, object]) -> str:
    op = str(operation.get("op", "?"))
    text = operation.get("text")
    target = operation.get("entry_id")
    parts = [op]
    if text:
        parts.append(repr(text))
    if target:
        parts.append(f"entry {target}")
    return " ".join(parts)


def _json(a: ApprovalInfo) -> dict[str, Any]:
    return {
        "id": a.id,
        "namespace": a.namespace,
        "path": a.path,
        "operation": a.operation,
        "candidate_ids": list(a.candidate_ids),
        "status": a.status,
        "created_at": a.created_at.isoformat(timespec="seconds"),
    }
