"""Import an export document, validated the way a merge is validated.

:func:`import_problems` checks everything the store's schema check
(:func:`worker.store.transfer.parse_document`) cannot, because it needs the consolidator's own
rules; :func:`import_document` refuses the document, naming every problem, unless there are
none, and only then writes it (one transaction). The checks:

- **content**: each consolidator-owned file's newest version is exactly a rendering of the
  document's active entries of that path (:func:`~worker.consolidation.render.as_shown`: the
  entries it shows, and the pointer line counting the rest when a budget left some out)
  (so no text reaches a prompt that no entry backs and no guard saw), and no active entry points
  at a file the document lacks;
- **guards**: every entry text, every line of an operator-written file and every pending
  approval's text passes :func:`~worker.consolidation.guards.violation`;
- **ids**: an entry id in the deterministic id space (32 hex digits, what
  :class:`~worker.consolidation.ids.EntryIds` makes) must be the id its own first candidate
  made, and that candidate must be in the document's ledger (so it is never merged again);
  anything else could collide with the id of a future candidate, which would then fail on the
  unique constraint forever;
- **versions**: file versions point at increasing namespace versions no later than the
  document's; an entry is added no later than the document's version and invalidated
  (``invalidated_version`` set exactly when ``invalid_at`` is) between its addition and it;
  ``superseded_by`` and ledger ``entry_id`` name entries of the document;
- **paths**: no file, entry or approval lies under a reserved prefix (the inbox route).

Import is a merge, so the ledger is checked against what the document contains
(:func:`backed_ledger`): a ledger row says "this candidate was consumed", and a row nothing
backs would swallow a later real candidate with that idempotency key (acknowledged, never
merged). A ``merged`` or ``duplicate`` row is kept only when an imported entry's provenance
holds its candidate id, a ``pending_approval`` row only when an imported approval does. Every
other row — ``rejected`` and ``forgotten`` ones, which leave no entry holding their id, and
rows no entry backs — is **dropped, each with its reason** (the import reports them): nothing
in the document can vouch for it, and a candidate sent again is simply judged again.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any, Final

from worker.consolidation import guards
from worker.consolidation.ids import ENTRY_ID_NAMESPACE
from worker.consolidation.render import as_shown
from worker.errors import StoreRefused
from worker.namespaces import reserved_prefix
from worker.store.memory import MemoryStore
from worker.store.records import CommitResult
from worker.store.transfer import EntryDoc, FileDoc, LedgerDoc, NamespaceDoc, parse_document
from worker.values import Entry

#: What :class:`~worker.consolidation.ids.EntryIds` produces: uuid5 hex.
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
