"""Pull conversations from a LangGraph server's threads into ``turn`` candidates.

The SDK's ``threads.search`` has no ``updated_after`` filter, so :func:`collect_threads` sorts
by ``updated_at`` descending and pages until it passes the window start. It keeps threads
updated in ``(window_start, window_end]`` (and matching the metadata filter), reads each
thread's ``values["messages"]``, cuts them into exchanges (user input + final assistant reply,
tool traffic ignored; see :mod:`worker.exchanges`) and makes one ``turn``
candidate per complete exchange after the thread's cursor. Each candidate's ``occurred_at`` is
the thread state's time (its checkpoint's ``created_at``, else the thread's ``updated_at``; never
after the scan): messages carry no time of their own, and the exchanges were said by then, not
when the scan found them.

Ids are deterministic: idempotency key ``thread:<thread_id>:<message id>`` (the final reply's
id), the key the capture middleware uses too — a turn captured live and found again by a scan
is one candidate. The cursor (per thread, the id of the last message consumed) then makes a
re-scan add nothing; an exchange still waiting for its final reply is left for a later scan.

Paging by offset while threads are being updated can show a thread twice (harmless: its
cursor) but never hides one that was in the window when the scan began.

**Whose thread it is** comes from what the server vouches for, never from metadata a client
can set (:func:`worker.identity.thread_owner`, the rule runs follow too): the owner the
server's auth handler records under ``owner_key`` (LangGraph's owner-only handler writes
``metadata["owner"] = ctx.user.identity`` on every thread, overwriting the client's value),
or a field named by the deployment that its chat service alone writes; with ``org_key``, the
owner's org the handler records beside it, and the thread files under the user *of that org*.
The thread's own ``user_id``/``org_id`` metadata is a client's claim: it may repeat the owner,
never replace it. A thread whose owner cannot be established, or whose claims name someone
else, is set aside (counted in :attr:`ThreadScan.set_aside`, cursor kept) and nothing of it
is filed.

Two steps, for at-least-once delivery: :func:`collect_threads` returns the candidates and the
cursor moves; enqueue (or commit) the candidates, then call :meth:`ThreadScan.advance`.
:func:`scan_threads` does both at once, for callers whose next step cannot fail.

>>> from datetime import UTC, datetime                          # doctest: +SKIP
>>> from langgraph_sdk import get_sync_client                     # doctest: +SKIP
>>> scan = collect_threads(get_sync_client(url=url, api_key=None), # doctest: +SKIP
...                        datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC),
...                        cursors=store)
>>> queue.enqueue_many(scan.candidates); scan.advance(store)      # doctest: +SKIP
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from worker.constants import MAX_TEXT_BYTES
from worker.errors import IdentityMismatch, InvalidCandidate, UnknownOwner
from worker.exchanges import split_exchanges
from worker.identity import OWNER_KEY, USER_KEY, Identity, thread_owner
from worker.models import Candidate, make_candidate, validate_id

logger = logging.getLogger(__name__)

#: The cursor-store ``source`` under which this module keeps its per-thread cursors.
CURSOR_SOURCE = "langgraph_threads"

#: Threads per ``threads.search`` page; the server caps pages at 1000.
DEFAULT_PAGE_SIZE = 100


class CursorStore(Protocol):
    """Where per-thread cursors live between scans (the SQL store implements it)."""

    def get_cursor(self, source: str, key: str) -> str | None: ...

    def set_cursor(self, source: str, key: str, value: str, *, now: datetime) -> None: ...


@dataclass
class ThreadScan:
    """What one scan found: candidates to enqueue, and the cursor moves to make afterwards."""

    candidates: list[Candidate] = field(default_factory=list)
    #: thread id -> id of the last message consumed.
    cursor_updates: dict[str, str] = field(default_factory=dict)
    #: Threads in the window that were looked at (with or without new exchanges).
    threads_seen: list[str] = field(default_factory=list)
    #: thread id -> why nothing of it was filed: its owner could not be established, or its
    #: metadata names another user or org than its owner (its cursor stays where it was).
    set_aside: dict[str, str] = field(default_factory=dict)

    def only(self, keep: Callable[[str], bool]) -> ThreadScan:
        """The candidates of the namespaces ``keep`` accepts, and the cursor moves of only the
        threads none of whose candidates were left out — a thread filtered out keeps its cursor,
        so a later scan that wants it still finds its messages."""
        kept = [c for c in self.candidates if keep(c.namespace)]
        left_out = {c.thread_id for c in self.candidates if not keep(c.namespace)}
        moves = {t: m for t, m in self.cursor_updates.items() if t not in left_out}
        return ThreadScan(kept, moves, list(self.threads_seen), dict(self.set_aside))

    def advance(self, cursors: CursorStore, *, now: datetime | None = None) -> None:
        """Record the cursor moves; call after the candidates are safely enqueued."""
        moment = now or datetime.now(UTC)
        for thread_id, message_id in self.cursor_updates.items():
            cursors.set_cursor(CURSOR_SOURCE, thread_id, message_id, now=moment)


class LangGraphThreads:
    """A LangGraph server's threads as a :class:`~worker.sources.base.ThreadSource`.

    Args:
        client: a langgraph-sdk ``SyncLangGraphClient``.
        assistant_key, owner_key, org_key: see :func:`collect_threads`.
        max_text_bytes: the longest candidate text (the deployment's limit).
    """

    def __init__(
        self,
        client: Any,
        *,
        assistant_key: str | None,
        max_text_bytes: int,
        owner_key: str = OWNER_KEY,
        org_key: str | None = None,
    ) -> None:
        self.client = client
        self.assistant_key = assistant_key
        self.max_text_bytes = max_text_bytes
        self.owner_key = owner_key
        self.org_key = org_key

    def collect(
        self,
        start: datetime,
        end: datetime,
        *,
        cursors: CursorStore,
        assistant_id: str | None,
        trace_id: str,
        now: datetime,
    ) -> ThreadScan:
        return collect_threads(
            self.client,
            start,
            end,
            cursors=cursors,
            assistant_id=assistant_id,
            assistant_key=self.assistant_key,
            trace_id=trace_id,
            max_text_bytes=self.max_text_bytes,
            now=now,
            owner_key=self.owner_key,
            org_key=self.org_key,
        )


def scan_threads(
    client: Any,
    window_start: datetime,
    window_end: datetime,
    *,
    cursors: CursorStore,
    owner_key: str = OWNER_KEY,
    org_key: str | None = None,
    assistant_id: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    now: datetime | None = None,
) -> list[Candidate]:
    """Collect the window's new exchanges as candidates and advance the cursors at once."""
    scan = collect_threads(
        client,
        window_start,
        window_end,
        cursors=cursors,
        owner_key=owner_key,
        org_key=org_key,
        assistant_id=assistant_id,
        page_size=page_size,
        now=now,
    )
    scan.advance(cursors, now=now)
    return scan.candidates


def collect_threads(
    client: Any,
    window_start: datetime,
    window_end: datetime,
    *,
    cursors: CursorStore,
    owner_key: str = OWNER_KEY,
    org_key: str | None = None,
    assistant_id: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    now: datetime | None = None,
    trace_id: str | None = None,
    max_text_bytes: int = MAX_TEXT_BYTES,
    assistant_key: str | None = None,
    user_key: str = USER_KEY,
) -> ThreadScan:
    """Find the threads updated in ``(window_start, window_end]`` and their new exchanges.

    Args:
        client: a langgraph-sdk ``SyncLangGraphClient``.
        cursors: per-thread cursors (read here; moved by :meth:`ThreadScan.advance`).
        owner_key: the thread-metadata key holding the thread's owner, as the server's auth
            handler (or the chat service alone) writes it; a thread without one is set aside.
        org_key: the thread-metadata key holding the owner's org, written the same way; with
            it, a thread files under ``org:<org>:user:<owner>`` and one without it is set
            aside. ``None``: no orgs (user ids are unique across the deployment).
        user_key: the client-written metadata key that may repeat the owner (a thread whose
            ``user_key`` names someone else is set aside).
        assistant_id: keep only threads whose metadata names this assistant, and file their
            memories in the per-assistant namespace ``user:<user>:<assistant_id>``.
        assistant_key: without ``assistant_id``, the thread-metadata key naming each thread's
            assistant (e.g. ``graph_id``): its exchanges go to ``user:<user>:<that id>``, the
            namespace the capture middleware with that ``assistant_id`` writes, so a scanned and
            a captured exchange are one candidate. A thread without it goes to ``user:<user>``.
        now: the candidates' ``created_at`` (default: the current time).
        trace_id: fallback trace id for turns whose checkpoint names no run.
    """
    if window_start.tzinfo is None or window_end.tzinfo is None:
        raise ValueError("window_start and window_end must be timezone-aware")
    moment = now or datetime.now(UTC)
    scan_trace = trace_id or f"scan-{uuid.uuid4().hex}"
    scan = ThreadScan()
    metadata: dict[str, Any] = {"assistant_id": assistant_id} if assistant_id else {}
    for thread in _threads_in_window(client, window_start, window_end, metadata, page_size):
        thread_id = str(thread["thread_id"])
        scan.threads_seen.append(thread_id)
        try:
            owner = thread_owner(
                _mapping(thread.get("metadata")),
                owner_key=owner_key,
                org_key=org_key,
                user_key=user_key,
            )
        except (UnknownOwner, IdentityMismatch) as exc:
            logger.warning("thread scan: thread %s set aside: %s", thread_id, exc)
            scan.set_aside[thread_id] = str(exc)
            continue
        thread_assistant = assistant_id or _assistant_of(thread, assistant_key)
        state = client.threads.get_state(thread_id)
        values = _mapping(state.get("values"))
        messages = values.get("messages") or []
        run_id = _mapping(state.get("metadata")).get("run_id")
        new = _after_cursor(messages, cursors.get_cursor(CURSOR_SOURCE, thread_id))
        try:
            found, last_id = _thread_candidates(
                new,
                thread_id=thread_id,
                owner=owner,
                assistant_id=thread_assistant,
                trace_id=str(run_id) if run_id else scan_trace,
                now=moment,
                occurred_at=_state_time(state, thread, moment),
                max_text_bytes=max_text_bytes,
            )
        except InvalidCandidate as exc:
            logger.warning("thread scan: thread %s skipped: %s", thread_id, exc)
            continue
        scan.candidates.extend(found)
        if last_id is not None:
            scan.cursor_updates[thread_id] = last_id
    return scan


def _threads_in_window(
    client: Any,
    window_start: datetime,
    window_end: datetime,
    metadata: Mapping[str, Any],
    page_size: int,
) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    offset = 0
    while True:
        page = client.threads.search(
            metadata=dict(metadata) or None,
            sort_by="updated_at",
            sort_order="desc",
            limit=page_size,
            offset=offset,
        )
        for thread in page:
            updated = _parse_time(thread["updated_at"])
            if updated <= window_start:
                return found  # sorted descending: everything after this is older still
            if updated <= window_end and str(thread["thread_id"]) not in seen:
                seen.add(str(thread["thread_id"]))
                found.append(thread)
        if len(page) < page_size:
            return found
        offset += page_size


def _after_cursor(messages: Sequence[Any], cursor: str | None) -> list[Any]:
    """Messages after the cursor's message; all of them if the cursor is unset or gone
    (compacted away by a summary — then deterministic ids make the repeats harmless)."""
    if cursor is None:
        return list(messages)
    for index, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("id") == cursor:
            return list(messages[index + 1 :])
    return list(messages)


def _thread_candidates(
    messages: Sequence[Any],
    *,
    thread_id: str,
    owner: Identity,
    assistant_id: str | None,
    trace_id: str,
    now: datetime,
    occurred_at: datetime,
    max_text_bytes: int,
) -> tuple[list[Candidate], str | None]:
    """Candidates for the complete exchanges, and the id of the last message they cover."""
    candidates: list[Candidate] = []
    last_id: str | None = None
    exchanges = split_exchanges(messages)
    for index, exchange in enumerate(exchanges):
        if not exchange.complete and index == len(exchanges) - 1:
            break  # still waiting for its final reply; a later scan takes it from here
        last_id = exchange.last_message_id or last_id
        key = exchange.idempotency_key(thread_id)
        if key is None or not exchange.complete:
            continue  # abandoned exchange (the user moved on without a reply): nothing to keep
        candidates.append(
            make_candidate(
                user_id=owner.user_id,
                org_id=owner.org_id,
                trace_id=trace_id,
                text=exchange.render(max_text_bytes),
                kind="turn",
                assistant_id=assistant_id,
                thread_id=thread_id,
                idempotency_key=key,
                source="thread_scan",
                max_text_bytes=max_text_bytes,
                now=now,
                occurred_at=occurred_at,
            )
        )
    return candidates, last_id


def _assistant_of(thread: Mapping[str, Any], key: str | None) -> str | None:
    """The thread's assistant under metadata ``key``, when it is a valid id."""
    value = _mapping(thread.get("metadata")).get(key) if key else None
    if not isinstance(value, str) or not value:
        return None
    try:
        return validate_id(value, "assistant_id")
    except InvalidCandidate:
        logger.info("thread scan: thread %s names no valid assistant", thread.get("thread_id"))
        return None


def _state_time(state: Mapping[str, Any], thread: Mapping[str, Any], now: datetime) -> datetime:
    """When the thread's messages were said by: its state's checkpoint time, else the thread's
    last update, and never after ``now`` (the server's clock may run ahead of ours)."""
    value = state.get("created_at") or thread["updated_at"]
    return min(_parse_time(value), now)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _parse_time(value: object) -> datetime:
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
