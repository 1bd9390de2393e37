"""Agents' direct edits to published files, absorbed at the next consolidation instead of
overwritten.

At delivery: the LangGraph store sink publishes compare-and-set; when the store holds content
memworker did not publish there, it raises :class:`~worker.errors.ExternalEdit` and writes
nothing, and :func:`absorb_external_edit` reacts, inside the delivery:

1. the edit is diffed against the version memworker had published (the marker's version, else
   the closest earlier one): each **added** line becomes a ``fact`` candidate, each
   **removed** line a ``forget`` candidate, source ``agent_edit``, deterministic ids (a
   repeated absorption adds nothing);
2. the edit (full content, hash, candidates) is recorded in SQL, tied to the namespace so an
   erase finds it, *before* anything else, so nothing the agent wrote disappears without a
   trace;
3. the delivery is then done without writing: the agent's content stays in the store until the
   candidates are merged (by the next consolidation when the edit check is on, else once
   :func:`settle_agent_edits`, run by the source scan, enqueued them); then the next delivery,
   or the settle step, publishes over exactly the absorbed content (its hash is the only
   thing ``overwrite`` accepts);
4. an edit with nothing to merge is published over at once; an edit of **org** memory, which
   only operators write, is recorded and the operator's version restored;
5. an edit over :data:`~worker.types.MAX_EDIT_LINES` lines or
   :data:`~worker.types.MAX_EDIT_BYTES` bytes is measured before any line of it is read
   (:func:`~worker.connectors.layout.bounded_lines`) and **refused**: recorded with the reason,
   never merged, and memworker's version restored over it (the record is then ``restored``).

A delivery never fails because of an edit, so an agent editing files cannot trip the sink's
breaker or stall other deliveries.

At consolidation (``MEMWORKER_DIRECT_EDITS``): before a batch is read, :meth:`EditCheck.collect`
asks the sink (:class:`~worker.connectors.base.ReadsEdits`) whether each published file of the
namespace still holds what memworker published, records a changed file exactly as a delivery
does (:func:`new_record`), and adds the candidates of every edit not yet in the ledger to the
batch. Both the consolidate task and ``memworker reconcile`` go through it. It is bounded and
never in the way: a store that is down or slow costs the batch at most
:data:`CHECK_DEADLINE_SECONDS` in all (one deadline for every read), the outage is logged once
(and its end once), and the candidates count against the namespace's pending cap (``room``):
those past it join a later batch.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from worker.connectors.base import CompareAndSetSink, PublishedFile, ReadsEdits, Sink
from worker.connectors.layout import bounded_lines, content_sha256
from worker.consolidation.render import is_pointer_line
from worker.errors import (
    ExternalEdit,
    InvalidCandidate,
    MemworkerError,
    NotFound,
)
from worker.models import Candidate, Namespace, Scope, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.bulkhead import Bulkhead
from worker.store.memory import MemoryStore
from worker.types import MAX_EDIT_BYTES, MAX_EDIT_LINES, MAX_TEXT_BYTES

log = logging.getLogger(__name__)

#: The source-cursor ``source`` under which absorbed edits are recorded.
CURSOR_SOURCE: Final = "agent_edits"
#: Records read per page by :func:`settle_agent_edits`.
SETTLE_PAGE: Final = 100

EditState = Literal["pending", "enqueued", "merged", "restored", "refused"]


@dataclass
class EditRecord:
    """One absorbed edit of one file, as recorded in SQL."""

    namespace: str
    path: str
    sha256: str
    state: EditState
    content: str
    base_version: int | None
    candidates: list[dict[str, Any]] = field(default_factory=list)
    seen_at: str = ""
    #: Why a ``refused`` edit was not merged (over the bounds).
    reason: str = ""

    @property
    def candidate_ids(self) -> list[str]:
        return [str(c["id"]) for c in self.candidates]

    def batch(self) -> list[Candidate]:
        return [Candidate.model_validate(c) for c in self.candidates]


def record_key(namespace: str, path: str) -> str:
    """The cursor key of a file's edit record (a digest: namespace and path may be long)."""
    return hashlib.sha256(f"{namespace}\x00{path}".encode()).hexdigest()


def load_record(store: MemoryStore, namespace: str, path: str) -> EditRecord | None:
    """The recorded edit of ``path``, or ``None``."""
    raw = store.get_cursor(CURSOR_SOURCE, record_key(namespace, path))
    return None if raw is None else EditRecord(**json.loads(raw))


def save_record(store: MemoryStore, record: EditRecord, *, now: datetime) -> None:
    store.set_cursor(
        CURSOR_SOURCE,
        record_key(record.namespace, record.path),
        json.dumps(record.__dict__, sort_keys=True),
        namespace=record.namespace,
        now=now,
    )


def edit_lines(content: str) -> list[str]:
    """The entry texts of a memory file's content: bullet lines, unescaped, headings skipped.

    The pointer line of a file over its budget
    (:func:`~worker.consolidation.render.is_pointer_line`) is memworker's, never an entry: an
    agent that keeps, changes or drops it adds or forgets nothing.

    >>> edit_lines("# Preferences\\n\\n- likes tea &amp; cake\\nplain line\\n")
    ['likes tea & cake', 'plain line']
    >>> pointer = "_2 more memories not shown here; search_memory finds them._"
    >>> edit_lines(f"# Facts\\n\\n- tea\\n\\n{pointer}")
    ['tea']
    """
    out: dict[str, None] = {}  # distinct texts in order, in linear time
    for raw in content.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or is_pointer_line(line):
            continue
        if line[:2] in ("- ", "* "):
            line = line[2:].strip()
        text = html.unescape(line.replace("\\#", "#"))
        if text:
            out.setdefault(text, None)
    return list(out)


def edit_candidates(
    namespace: str,
    path: str,
    before: str,
    after: str,
    *,
    now: datetime,
    max_text_bytes: int = MAX_TEXT_BYTES,
) -> list[Candidate]:
    """``fact`` candidates for the lines ``after`` adds, ``forget`` ones for those it removes."""
    ns = Namespace.parse(namespace)
    sha = content_sha256(after)
    old, new = edit_lines(before), edit_lines(after)
    old_set, new_set = set(old), set(new)
    changes = [("fact", line) for line in new if line not in old_set]
    changes += [("forget", line) for line in old if line not in new_set]
    found: list[Candidate] = []
    for kind, text in changes:
        try:
            found.append(
                make_candidate(
                    user_id=ns.user_id,
                    trace_id=f"agent-edit-{sha[:16]}",
                    text=text,
                    kind=kind,
                    topic=path,
                    assistant_id=ns.assistant_id,
                    org_id=ns.org_id,  # a user of an org stays that org's user
                    scope=ns.scope.value,
                    idempotency_key=f"agent_edit:{path}:{sha}:{kind}:{text}",
                    source="agent_edit",
                    max_text_bytes=max_text_bytes,
                    now=now,
                )
            )
        except InvalidCandidate as exc:
            # Kept in the edit record's content; only the candidate is left out.
            log.warning("agent edit of %s%s: a line was not absorbed: %s", namespace, path, exc)
    return found


def absorb_external_edit(
    store: MemoryStore,
    sink: Sink,
    item: PublishedFile,
    edit: ExternalEdit,
    *,
    now: datetime | None = None,
) -> str | None:
    """React to ``edit`` raised while delivering ``item``; the delivery's error text, or
    ``None`` when the delivery is done (absorbed and waiting for its merge, or published)."""
    moment = now or datetime.now(UTC)
    sha = content_sha256(edit.content)
    record = load_record(store, item.namespace, item.path)
    if record is None or record.sha256 != sha:
        record = new_record(store, item, edit, now=moment)
        save_record(store, record, now=moment)
        log.info(
            "agent edit of %s%s absorbed: %d candidate(s), state %s",
            item.namespace,
            item.path,
            len(record.candidates),
            record.state,
        )
        if record.state in ("pending", "enqueued"):
            return None  # the agent's content stays until its candidates are merged
    elif record.state in ("pending", "enqueued") and not _merged(store, record):
        return None
    return _publish_over(store, sink, item, record, moment)


def new_record(
    store: MemoryStore,
    item: PublishedFile,
    edit: ExternalEdit,
    *,
    now: datetime,
    item_was_published: bool = False,
) -> EditRecord:
    """The record of ``edit`` found over ``item``: its candidates, or why it has none.
    ``item_was_published``: ``item`` is a version the agent may have edited (the check at
    consolidation reads over the current version), not only the one being delivered."""
    sha = content_sha256(edit.content)
    stamp = now.isoformat()
    _lines, refused = bounded_lines(
        edit.content, max_bytes=MAX_EDIT_BYTES, max_lines=MAX_EDIT_LINES
    )
    if refused is not None:
        # Measured before any line is read: recorded, never merged, memworker's version back.
        reason = f"the edit has {refused}; not merged, the published version is restored"
        log.warning("agent edit of %s%s refused: %s", item.namespace, item.path, reason)
        kept = edit.content[:MAX_EDIT_BYTES]
        return EditRecord(item.namespace, item.path, sha, "refused", kept, None, [], stamp, reason)
    base_version, before = _base(store, item, edit, upto=item.version + item_was_published)
    if Namespace.parse(item.namespace).scope is Scope.ORG:
        # Org memory is written by operators only: keep the edit as a record, restore theirs.
        return EditRecord(
            item.namespace, item.path, sha, "restored", edit.content, base_version, [], stamp
        )
    if _published_before(store, item, sha):
        return EditRecord(
            item.namespace, item.path, sha, "merged", edit.content, base_version, [], stamp
        )
    batch = edit_candidates(item.namespace, item.path, before, edit.content, now=now)
    state: EditState = "pending" if batch else "merged"
    dumped = [c.model_dump(mode="json") for c in batch]
    return EditRecord(
        item.namespace, item.path, sha, state, edit.content, base_version, dumped, stamp
    )


def _base(
    store: MemoryStore, item: PublishedFile, edit: ExternalEdit, *, upto: int
) -> tuple[int | None, str]:
    """The version the agent edited, and its content: the one the marker names, else — the
    agent's write dropped the marker — the committed version before ``upto`` closest to the
    edit (fewest lines apart; the newest on a tie), since deliveries may have skipped some."""
    try:
        history = [v for v in store.file_history(item.namespace, item.path) if v.version < upto]
    except NotFound:
        return None, ""
    if edit.published_version is not None:
        named = [v for v in history if v.version == edit.published_version]
        if named:
            return named[0].version, named[0].content
    if not history:
        return None, ""
    lines = set(edit_lines(edit.content))
    best = min(
        reversed(history), key=lambda v: len(lines.symmetric_difference(edit_lines(v.content)))
    )
    return best.version, best.content


def _published_before(store: MemoryStore, item: PublishedFile, sha: str) -> bool:
    """True when the content is one of memworker's own versions (published before markers)."""
    try:
        history = store.file_history(item.namespace, item.path)
    except NotFound:
        return False
    return any(content_sha256(v.content) == sha for v in history)


def _merged(store: MemoryStore, record: EditRecord) -> bool:
    ids = record.candidate_ids
    return not ids or store.already_recorded(record.namespace, ids) >= set(ids)


def _publish_over(
    store: MemoryStore, sink: Sink, item: PublishedFile, record: EditRecord, now: datetime
) -> str | None:
    if not isinstance(sink, CompareAndSetSink):
        return f"sink {sink.name} raised ExternalEdit but cannot overwrite"
    try:
        sink.overwrite(item, expected_sha256=record.sha256)
    except ExternalEdit:
        return f"{item.namespace}{item.path} changed again while it was absorbed; retried later"
    except MemworkerError as exc:
        return str(exc)[:2000]
    if record.state in ("pending", "enqueued"):
        record.state = "merged"
        save_record(store, record, now=now)
    elif record.state == "refused":
        record.state = "restored"  # its reason stays: why it was never merged
        save_record(store, record, now=now)
    return None


# --- the scan's step ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SettleReport:
    """What :func:`settle_agent_edits` did."""

    enqueued: int = 0
    published: int = 0


def settle_agent_edits(
    queue: RedisQueue,
    store: MemoryStore,
    sink: Sink | None,
    *,
    now: datetime,
    keep: Callable[[str], bool] | None = None,
    bulkhead: Bulkhead | None = None,
) -> SettleReport:
    """Enqueue the candidates of recorded edits (then mark their namespaces due), and publish
    over the edits whose candidates are merged, or that were refused, when no newer delivery
    did it; ``keep`` limits it to some namespaces. Each edit is its own bulkhead: one whose
    namespace's backlog is full (its candidates count against the cap like any other) or whose
    enqueue fails stays pending and is set aside in ``bulkhead``; the others go on."""
    bulkhead = bulkhead if bulkhead is not None else Bulkhead("agent edits")
    enqueued = published = 0
    for record in _open_records(store):
        if keep is not None and not keep(record.namespace):
            continue
        if record.state == "pending" and not _merged(store, record):
            queued = bulkhead.run(
                record.namespace,
                lambda r=record: _enqueue(queue, store, r, now),  # type: ignore[misc]
                item=record.path,
            )
            enqueued += queued or 0
        elif sink is not None and (record.state == "refused" or _merged(store, record)):
            current = _latest(store, record)
            if current is not None and _publish_over(store, sink, current, record, now) is None:
                published += 1
    return SettleReport(enqueued, published)


def _enqueue(queue: RedisQueue, store: MemoryStore, record: EditRecord, now: datetime) -> int:
    """Queue ``record``'s candidates and mark its namespace due; the record is ``enqueued``
    only once all of them went in (deterministic ids: a repeat after a refusal merges once)."""
    batch = record.batch()
    queue.enqueue_many(batch)
    queue.mark_due(record.namespace)
    record.state = "enqueued"
    save_record(store, record, now=now)
    return len(batch)


def _latest(store: MemoryStore, record: EditRecord) -> PublishedFile | None:
    try:
        history = store.file_history(record.namespace, record.path)
    except NotFound:
        return None
    last = history[-1]
    return PublishedFile(
        record.namespace,
        record.path,
        last.content,
        last.version,
        history[0].created_at,
        last.created_at,
    )


def _open_records(store: MemoryStore) -> list[EditRecord]:
    """Every edit record still pending, enqueued or refused (not yet published over), page
    by page."""
    found: list[EditRecord] = []
    after = ""
    while True:
        page = store.list_cursors(CURSOR_SOURCE, limit=SETTLE_PAGE, after=after)
        for _key, value in page:
            record = EditRecord(**json.loads(value))
            if record.state in ("pending", "enqueued", "refused"):
                found.append(record)
        if len(page) < SETTLE_PAGE:
            return found
        after = page[-1][0]


#: Longest a consolidation waits for the store to read its files back: a store next to the
#: workers answers one read in milliseconds, so this only trips when it is down or hung.
CHECK_DEADLINE_SECONDS: Final = 2.0


@dataclass
class EditCheck:
    """Reads a namespace's published files back from ``sink`` before its batch is merged."""

    sink: ReadsEdits
    deadline_seconds: float = CHECK_DEADLINE_SECONDS
    _down: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def collect(
        self, store: MemoryStore, namespace: str, *, now: datetime, room: int | None = None
    ) -> list[Candidate]:
        """The candidates of ``namespace``'s agent edits not yet merged: the edits found now
        (recorded first) and those recorded earlier, at most ``room`` of them (what the
        namespace's pending cap leaves beside the batch; the rest stay recorded and join a
        later batch). Never raises for the sink."""
        until = time.monotonic() + self.deadline_seconds
        reading = True
        found: list[Candidate] = []
        for item in self._published(store, namespace):
            record = load_record(store, namespace, item.path)
            if reading:
                reading, edit = self._read(item, until)
                if edit is not None and (record is None or record.sha256 != edit_sha(edit)):
                    record = self._record(store, item, edit, now=now)
            if record is not None and record.state in ("pending", "enqueued"):
                merged = store.already_recorded(namespace, record.candidate_ids)
                found += [c for c in record.batch() if c.id not in merged]
        if room is not None and len(found) > room:
            log.info(
                "agent edits of %s: %d candidate(s) join this batch, %d wait for a later one "
                "(the pending cap)",
                namespace,
                max(room, 0),
                len(found) - max(room, 0),
            )
            return found[: max(room, 0)]
        return found

    def _published(self, store: MemoryStore, namespace: str) -> list[PublishedFile]:
        """The namespace's current files, as the versions a delivery publishes (two reads)."""
        contents = store.current_files(namespace)
        return [
            PublishedFile(
                namespace,
                info.path,
                contents[info.path],
                info.current_version,
                info.created_at,
                info.modified_at,
            )
            for info in store.list_files(namespace)
            if info.path in contents
        ]

    def _read(self, item: PublishedFile, until: float) -> tuple[bool, ExternalEdit | None]:
        """(whether to read on, the edit the sink holds over ``item``); past the deadline or
        with the sink down nothing more is read this time."""
        remaining = until - time.monotonic()
        if remaining <= 0:
            self._state(down=True, reason=f"no answer within {self.deadline_seconds:g} s")
            return False, None
        try:
            edit = self.sink.external_edit(item, timeout=remaining)
        except MemworkerError as exc:
            self._state(down=True, reason=str(exc))
            return False, None
        self._state(down=False, reason="")
        return True, edit

    def _record(
        self, store: MemoryStore, item: PublishedFile, edit: ExternalEdit, *, now: datetime
    ) -> EditRecord:
        record = new_record(store, item, edit, now=now, item_was_published=True)
        save_record(store, record, now=now)
        log.info(
            "agent edit of %s%s absorbed at consolidation: %d candidate(s), state %s",
            item.namespace,
            item.path,
            len(record.candidates),
            record.state,
        )
        return record

    def _state(self, *, down: bool, reason: str) -> None:
        """Log the sink going down, and coming back, once each (not once per batch)."""
        with self._lock:
            changed, self._down = self._down != down, down
        if changed and down:
            log.warning(
                "agent edits: the store did not answer (%s); batches go on without reading it, "
                "edits are picked up once it is back",
                reason,
            )
        elif changed:
            log.info("agent edits: the store answers again; edits are read at consolidation")


def edit_sha(edit: ExternalEdit) -> str:
    """The hash an edit is recorded under."""
    return content_sha256(edit.content)
