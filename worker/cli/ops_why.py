"""What the assistant remembers and why: ``search``, ``why`` and ``candidate``.

Thin callers of the deployment's search (:class:`~worker.service.memory_search.SqlMemorySearch`
as the runtime builds it: hybrid with ``MEMWORKER_EMBEDDINGS``) and of
:mod:`worker.service.provenance`. They only read.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from worker.cli.common import namespace_from, print_json
from worker.cli.ops_support import (
    AssistantOpt,
    JsonOpt,
    NamespaceOpt,
    OrgOpt,
    UserOpt,
    console,
    operator_session,
)
from worker.errors import InvalidOption

if TYPE_CHECKING:
    from rich.text import Text

    from worker.service.provenance import CandidateFate
    from worker.store.records import EntryProvenance, LedgerInfo

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
    from worker.service.provenance import explain

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
    from worker.service.provenance import candidate_fate

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
