"""Moving and erasing memory: import of an export document, erasing a user everywhere, the store's
layout migration.

Import: :func:`import_problems` checks everything the store's schema check
(:func:`worker.store.transfer.parse_document`) cannot, because it needs the consolidator's own
rules; :func:`import_document` writes the document (one transaction) only when there is no
problem, else refuses it naming every one. The checks:

- **content**: each consolidator-owned file's newest version is exactly a rendering of the
  document's active entries of that path (:func:`~worker.consolidation.render.as_shown`), so
  no text reaches a prompt that no entry backs and no guard saw, and no active entry points at
  a file the document lacks;
- **guards**: every entry text, every line of an operator-written file and every pending
  approval's text passes :func:`~worker.consolidation.guards.violation`;
- **ids**: an entry id in the deterministic id space (what
  :class:`~worker.consolidation.plan.EntryIds` makes) must be the id its own first candidate
  made, and that candidate must be in the document's ledger; anything else could collide with
  a future candidate's id, which would then fail on the unique constraint forever;
- **versions**: file versions point at increasing namespace versions no later than the
  document's; an entry is added no later than the document's version and invalidated
  (``invalidated_version`` set exactly when ``invalid_at`` is) between its addition and it;
  ``superseded_by`` and ledger ``entry_id`` name entries of the document;
- **paths**: no file, entry or approval lies under a reserved prefix (the inbox route).

The ledger is checked against what the document contains (:func:`backed_ledger`): a row
nothing backs would swallow a later real candidate with that idempotency key (acknowledged,
never merged). A ``merged`` or ``duplicate`` row is kept only when an imported entry's
provenance holds its candidate id, a ``pending_approval`` row only when an imported approval
does; every other row is **dropped, each with its reason**, and a candidate sent again is
simply judged again.

Erase (:func:`erase`): the queue first (so no batch of the user is merged back
afterwards), then SQL in one transaction (which queues an erase tombstone per file and sink,
and takes the namespace's fence), then the tombstones are delivered.

What keeps erased data from coming back:

* The queue's purge refuses a namespace a worker holds an unexpired lease on, checked and
  erased in one script (after the operator confirmed, not before): that namespace is reported
  busy and left whole, to be erased once the batch is done.
* A worker whose lease expired (a zombie) finds its token gone; its commit is refused by the
  SQL fence (the erase records the namespace's version, see :mod:`worker.store.commit`), so it
  writes nothing, not even a run row, and lease tokens are never reissued to trim a later batch.
* A delivery read before the erase and landing after it is taken back out of the sink
  (:mod:`worker.service.publish`).

Layout migration: the old layout mapped every org namespace to one shared store tuple, where
the last org to publish a path won it. The shared item cannot tell whose it is, so each org's
files are published again **from SQL** to their own tuple, and then the old shared items are
deleted. Safe to run more than once, and while workers run (publishing is compare-and-set: an
item already at its new place is published over only if it is still memworker's).
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any, Final

from worker.connectors.base import (
    ErasesAgentWrites,
    PublishedFile,
    ReadsBack,
    Sink,
    TidiesAfterErase,
)
from worker.connectors.layout import LEGACY_TEMPLATE, fill, store_key
from worker.consolidation import guards
from worker.consolidation.plan import ENTRY_ID_NAMESPACE
from worker.consolidation.render import as_shown
from worker.errors import BusyNamespace, ExternalEdit, MemworkerError, SinkError, StoreRefused
from worker.models import Entry, Namespace, Scope
from worker.queue.admin import QueueAdmin
from worker.service.bulkhead import Progress, no_progress
from worker.service.publish import DeliveryReport, publish_now
from worker.store.memory import MemoryStore
from worker.store.records import CommitResult
from worker.store.transfer import EntryDoc, FileDoc, LedgerDoc, NamespaceDoc, parse_document
from worker.types import reserved_prefix

#: What :class:`~worker.consolidation.plan.EntryIds` produces: uuid5 hex.
DETERMINISTIC_ID: Final = re.compile(r"[0-9a-f]{32}")
#: Entry-creating ops one candidate may account for in one plan (a turn's statements).
MAX_IDS_PER_CANDIDATE: Final = 32


def _entry(doc: EntryDoc) -> Entry:
    return Entry(
        id=doc.id, path=doc.path, text=doc.text, key=doc.key, valid_from=doc.valid_from,
        invalid_at=doc.invalid_at, created_at=doc.created_at,
        last_confirmed_at=doc.last_confirmed_at, confirmations=max(doc.confirmations, 1),
    )  # fmt: skip


def _content_problems(doc: NamespaceDoc) -> list[str]:
    problems = []
    active = [_entry(e) for e in doc.entries if e.invalid_at is None]
    paths = {f.path for f in doc.files}
    for f in doc.files:
        content = f.versions[-1].content
        if f.operator_owned:
            for n, line in enumerate(content.splitlines(), start=1):
                reason = guards.violation(line)
                if reason:
                    problems.append(f"file {f.path} (operator-written) line {n}: {reason}")
            continue
        expected = as_shown(f.path, content, active)
        if content != expected:
            problems.append(f"file {f.path}: {_first_difference(content, expected)}")
    for e in doc.entries:
        if e.invalid_at is None and e.path not in paths:
            problems.append(
                f"entry {e.id} is active on {e.path}, but the document has no such file"
            )
    return problems


def _first_difference(content: str, expected: str) -> str:
    got, want = content.splitlines(), expected.splitlines()
    for n, (a, b) in enumerate(zip(got, want, strict=False), start=1):
        if a != b:
            return f"content is not the rendering of its entries (line {n} differs)"
    extra = "more" if len(got) > len(want) else "fewer"
    return f"content is not the rendering of its entries ({extra} lines than its entries make)"


def _guard_problems(doc: NamespaceDoc) -> list[str]:
    problems = []
    for e in doc.entries:
        reason = guards.violation(e.text)
        if reason:
            problems.append(f"entry {e.id}: {reason}")
    for n, a in enumerate(doc.approvals, start=1):
        text = a.operation.get("text")
        reason = guards.violation(text) if isinstance(text, str) else None
        if reason:
            problems.append(f"approval {n}: {reason}")
    return problems


def _derived(entry_id: str, first_candidate: str, namespaces: Sequence[str]) -> bool:
    for ns in namespaces:
        for n in range(MAX_IDS_PER_CANDIDATE):
            name = f"{ns}\x00{first_candidate}\x00{n}"
            if uuid.uuid5(ENTRY_ID_NAMESPACE, name).hex == entry_id:
                return True
    return False


def _id_problems(doc: NamespaceDoc, namespace: str) -> list[str]:
    consumed = {r.candidate_id for r in doc.ledger}
    spaces = tuple(dict.fromkeys((doc.namespace, namespace)))
    problems = []
    for e in doc.entries:
        if not DETERMINISTIC_ID.fullmatch(e.id):
            continue
        first = e.candidate_ids[0] if e.candidate_ids else None
        if first is None or first not in consumed or not _derived(e.id, first, spaces):
            problems.append(
                f"entry {e.id}: its id is in the space of generated entry ids but is not the id "
                "its own (ledgered) first candidate made, so a future candidate could get it; "
                "give it an id that is not 32 hex digits (e.g. prefix it with 'import-')"
            )
    return problems


def _file_version_problems(f: FileDoc, version: int) -> list[str]:
    numbers = [v.namespace_version for v in f.versions]
    if any(b <= a for a, b in pairwise(numbers)):
        return [f"file {f.path}: namespace versions {numbers} do not increase"]
    if numbers[-1] > version:
        return [f"file {f.path}: version {len(numbers)} is at namespace version {numbers[-1]}, "
                f"after the document's version {version}"]  # fmt: skip
    return []


def _version_problems(doc: NamespaceDoc) -> list[str]:
    problems = [p for f in doc.files for p in _file_version_problems(f, doc.version)]
    ids = {e.id for e in doc.entries}
    for e in doc.entries:
        if e.added_version > doc.version:
            problems.append(f"entry {e.id}: added at version {e.added_version}, after the "
                            f"document's version {doc.version}")  # fmt: skip
        if (e.invalid_at is None) != (e.invalidated_version is None):
            problems.append(f"entry {e.id}: invalid_at and invalidated_version disagree")
        elif e.invalidated_version is not None and not (
            e.added_version <= e.invalidated_version <= doc.version
        ):
            problems.append(f"entry {e.id}: invalidated at version {e.invalidated_version}, "
                            f"outside {e.added_version}..{doc.version}")  # fmt: skip
        if e.superseded_by is not None and e.superseded_by not in ids:
            problems.append(f"entry {e.id}: superseded_by {e.superseded_by} is not in the document")
    for r in doc.ledger:
        if r.entry_id is not None and r.entry_id not in ids:
            problems.append(
                f"ledger row {r.candidate_id}: entry {r.entry_id} is not in the document"
            )
    return problems


def _path_problems(doc: NamespaceDoc, reserved: Sequence[str]) -> list[str]:
    paths = [f.path for f in doc.files] + [e.path for e in doc.entries]
    paths += [a.path for a in doc.approvals]
    return [
        f"path {p} is under the reserved prefix {prefix} (the inbox route); memworker never "
        "writes there: move it to another file"
        for p in dict.fromkeys(paths)
        if (prefix := reserved_prefix(p, reserved)) is not None
    ]


def import_problems(
    doc: NamespaceDoc, namespace: str, *, reserved: Sequence[str] = ()
) -> list[str]:
    """Every problem that stops ``doc`` from being imported into ``namespace`` (see above);
    ``reserved``: path prefixes refused beside the built-in ones (the deployment's inbox)."""
    return (
        _version_problems(doc)
        + _id_problems(doc, namespace)
        + _path_problems(doc, reserved)
        + _guard_problems(doc)
        + _content_problems(doc)
    )


def backed_ledger(doc: NamespaceDoc) -> tuple[list[int], list[str]]:
    """The indexes of the ledger rows the document backs, and the reason each other row is
    dropped (see the module notes)."""
    by_entries = {cid for e in doc.entries for cid in e.candidate_ids}
    by_approvals = {cid for a in doc.approvals for cid in a.candidate_ids}
    kept: list[int] = []
    dropped: list[str] = []
    for index, row in enumerate(doc.ledger):
        reason = _unbacked(row, by_entries, by_approvals)
        if reason is None:
            kept.append(index)
        else:
            dropped.append(f"ledger row {row.candidate_id} ({row.outcome}): {reason}")
    return kept, dropped


def _unbacked(row: LedgerDoc, by_entries: set[str], by_approvals: set[str]) -> str | None:
    if row.outcome in ("merged", "duplicate"):
        if row.candidate_id in by_entries:
            return None
        return "no imported entry's provenance holds this candidate id"
    if row.outcome == "pending_approval":
        if row.candidate_id in by_approvals:
            return None
        return "no imported approval holds this candidate id"
    return "a rejected or forgotten candidate leaves no entry holding its id to vouch for it"


def import_document(
    store: MemoryStore,
    data: Mapping[str, Any],
    *,
    namespace: str | None,
    sinks: Sequence[str],
    now: datetime,
    reserved: Sequence[str] = (),
    restore_erased: bool = False,
) -> tuple[NamespaceDoc, CommitResult, list[str]]:
    """Validate ``data`` completely, then write it; :class:`StoreRefused` names every problem.
    A namespace that was erased is brought back only with ``restore_erased``
    (:class:`~worker.errors.ErasedNamespace` otherwise: erase is final).

    Returns the document as written (its ledger only the rows it backs, see
    :func:`backed_ledger`), the commit, and the reason each dropped ledger row was dropped.
    """
    doc = parse_document(data)
    key = namespace or doc.namespace
    problems = import_problems(doc, key, reserved=reserved)
    if problems:
        raise StoreRefused(
            "the import document is invalid (nothing was written): " + "; ".join(problems)
        )
    kept, dropped = backed_ledger(doc)
    rows = list(data["ledger"])
    written = {**data, "ledger": [rows[i] for i in kept]}
    doc = doc.model_copy(update={"ledger": [doc.ledger[i] for i in kept]})
    result = store.import_namespace(
        written, namespace=key, sinks=sinks, now=now, restore_erased=restore_erased
    )
    return doc, result, dropped


#: The steps of an erase after each namespace's purge, as a progress display names them.
ERASE_STEPS: Final = ("store", "sinks")


@dataclass(frozen=True)
class EraseTarget:
    """The namespaces an erase would cover, and what stands in its way."""

    keys: list[str]  #: the user's namespaces the store or the queue knows, per the request
    others: list[str]  #: the user's namespaces the request leaves alone (other assistants)


@dataclass(frozen=True)
class Erased:
    files: dict[str, list[str]]  #: per namespace, the paths of the files erased
    queued: dict[str, int]  #: per namespace, the queued candidates dropped
    busy: list[str]  #: namespaces left whole: a worker held them (run forget again later)
    sql_rows: dict[str, int]  #: per table, the rows deleted (tables with none left out)
    delivery: DeliveryReport  #: the sinks' deletions


def erase_target(
    queue: QueueAdmin,
    store: MemoryStore,
    user: str,
    *,
    assistant: str | None = None,
    every_assistant: bool = False,
    org: str | None = None,
) -> EraseTarget:
    """The user's namespaces to erase: one (with or without an assistant), or all of them.

    With ``org``, the user of that org; without, the user of no org: the same user id in
    another org is another person, never erased with this one."""
    every = _all_of_user(queue, store, user, org)
    if every_assistant:
        keys = every
    else:
        key = Namespace.for_user(user, assistant_id=assistant, org_id=org).key
        known = key in every or queue.namespace_state(key).known
        keys = [key] if known else []
    return EraseTarget(keys, [k for k in every if k not in keys])


def erase(
    queue: QueueAdmin,
    store: MemoryStore,
    sinks: Mapping[str, Sink],
    keys: list[str],
    *,
    now: datetime | None = None,
    progress: Progress = no_progress,
) -> Erased:
    """Erase ``keys`` from the queue, then SQL, then the sinks (see the module docstring).

    A namespace a worker holds right now is left whole and listed in ``busy``. ``now`` is a
    test's injected time; without it the tombstones are due by the database's clock.
    ``progress`` is told each step done: each namespace's purge, then the SQL erase and the
    sinks' deletions.
    """
    queued: dict[str, int] = {}
    busy: list[str] = []
    with progress(len(keys) + len(ERASE_STEPS)) as advance:
        for key in keys:
            try:
                queued[key] = queue.purge_namespace(key)
            except BusyNamespace:
                busy.append(key)
            advance(key)
        done = [k for k in keys if k not in busy]
        files = {k: [f.path for f in store.list_files(k)] for k in done}
        if not done:
            return Erased(files, queued, busy, {}, DeliveryReport(0, 0))
        # What agents wrote (inbox items) holds the user's words too, and the inbox cursors go
        # with the SQL erase: removed first, so a sink that fails here leaves the user known and
        # `forget` can simply run again (nothing is erased from SQL yet, nor re-read later).
        _erase_agent_writes(sinks, done)
        report = store.erase_namespaces(done, now=now, sinks=tuple(sinks))
        advance(ERASE_STEPS[0])
        delivery = publish_now(store, sinks, now=now, namespaces=done)
        _tidy_after_erase(sinks, files)
        advance(ERASE_STEPS[1])
    rows = {table: n for table, n in sorted(report.deleted.items()) if n}
    return Erased(files, queued, busy, rows, delivery)


def _erase_agent_writes(sinks: Mapping[str, Sink], keys: list[str]) -> None:
    """Delete what agents wrote for ``keys`` in every sink that holds such writes."""
    for sink in sinks.values():
        if not isinstance(sink, ErasesAgentWrites):
            continue
        try:
            sink.erase_agent_writes(keys)
        except SinkError as exc:
            raise SinkError(
                f"{exc}; nothing was erased from SQL. Run `memworker forget` again once the "
                f"{sink.name} sink answers"
            ) from exc


def _all_of_user(queue: QueueAdmin, store: MemoryStore, user: str, org: str | None) -> list[str]:
    found: set[str] = set()
    for key in [*store.namespaces(scope="user", user_id=user), *queue.namespaces()]:
        with contextlib.suppress(MemworkerError):
            ns = Namespace.parse(key)
            if ns.scope is Scope.USER and ns.user_id == user and ns.org_id == org:
                found.add(key)
    return sorted(found)


def _tidy_after_erase(sinks: Mapping[str, Sink], files: dict[str, list[str]]) -> None:
    for sink in sinks.values():
        if isinstance(sink, TidiesAfterErase):
            sink.tidy_after_erase(files)


@dataclass(frozen=True)
class Move:
    """One org file: where the old layout kept it and where it goes now."""

    namespace: str
    path: str
    old_namespace: tuple[str, ...]
    old_key: str
    new_namespace: tuple[str, ...]
    new_key: str
    #: Whether an item was at the old place (always reported by a dry run as it is now).
    old_present: bool
    #: ``moved``, ``would move``, or ``kept: <why>`` when the new place holds an agent's edit.
    outcome: str


def migrate_org_items(
    store: MemoryStore,
    sink: ReadsBack,
    *,
    old_template: Sequence[str] = LEGACY_TEMPLATE,
    old_route: str = "/memories/",
    dry_run: bool = False,
) -> list[Move]:
    """Publish every org file to its own tuple from SQL, then delete the old shared items;
    ``dry_run`` only reports what it would do."""
    moves: list[Move] = []
    stale: set[tuple[tuple[str, ...], str]] = set()
    for key in store.namespaces(scope="org"):
        ns = Namespace.parse(key)
        old_ns = fill(old_template, ns)
        for info in store.list_files(key):
            old_key = store_key(info.path, old_route)
            new_ns, new_key = sink.namespace_for(key), sink.key_for(key, info.path)
            present = sink.has_item(old_ns, old_key)
            outcome = "would move" if dry_run else "moved"
            if not dry_run:
                history = store.file_history(key, info.path)
                last = history[-1]
                item = PublishedFile(
                    key, info.path, last.content, last.version, history[0].created_at,
                    last.created_at,
                )  # fmt: skip
                try:
                    sink.deliver(item)
                except ExternalEdit:
                    outcome = "kept: the new place holds content memworker did not publish"
            if (old_ns, old_key) != (new_ns, new_key):
                stale.add((old_ns, old_key))
            moves.append(Move(key, info.path, old_ns, old_key, new_ns, new_key, present, outcome))
    if not dry_run:
        for old_ns, old_key in sorted(stale):
            sink.remove_item(old_ns, old_key)
    return moves
