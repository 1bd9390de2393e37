"""Absorb an agent's direct edit at the next consolidation of its namespace, not at a scan.

Before a batch is read, :meth:`EditCheck.collect` asks the compare-and-set sink, through its
:class:`~worker.sinks.base.ReadsEdits` protocol, whether each published file of the namespace
still holds what memworker published: one read per file, all of them within one deadline. A
changed file is recorded exactly as a delivery records it (:mod:`.agent_edits`: the full
content and its diff's candidates, deterministic ids), and the candidates of every edit of the
namespace not yet in the ledger join the batch. The delivery after the commit then meets the
recorded edit and publishes over exactly the absorbed content.

Both ways a batch is consolidated go through it: the worker's consolidate task (the pipeline
merges the candidates into the batch it claimed) and ``memworker reconcile`` (which, when
nothing else is pending, enqueues them first so there is a batch to claim).

**Bounded and never in the way.** It runs only when a sink that reads edits back is configured
with ``MEMWORKER_DIRECT_EDITS``, never on the hot path. A store that is down or slow costs the
batch at most :data:`CHECK_DEADLINE_SECONDS` in all (one deadline for every read, not one per
read): the batch goes on with the edits already recorded, the rest is read at the next
consolidation, and the outage is logged once (and its end once). What an edit costs is bounded
too: an edit over :data:`~worker.constants.MAX_EDIT_LINES` lines or
:data:`~worker.constants.MAX_EDIT_BYTES` bytes is refused before a line of it is read
(:func:`~worker.service.agent_edits.new_record`), and the candidates joining one batch count
against the namespace's pending cap (``room``): those past it join a later batch.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from worker.errors import ExternalEdit, MemworkerError
from worker.models import Candidate
from worker.service.agent_edits import (
    EditRecord,
    load_record,
    new_record,
    save_record,
)
from worker.sinks.base import PublishedFile, ReadsEdits
from worker.store.memory import MemoryStore
from worker.store_layout import content_sha256

log = logging.getLogger(__name__)

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
