"""A LangGraph server: its store as a sink (in the form deep agents read) and its threads as a
source.

The sink: each version becomes one store item, placed by the :class:`StoreLayout`
(:mod:`worker.connectors.layout`: one namespace template and route per scope, validated
so that no two memory namespaces can share a tuple):

- **namespace**: by default ``(assistant_id, user_id, "memories")`` for user memory,
  ``(assistant_id, "_shared", "memories")`` for agent memory, ``(org_id, "_org", "memories")``
  for org memory;
- **key**: the path relative to the scope's route, ``/memories/preferences.md`` →
  ``/preferences.md``, because a deepagents ``CompositeBackend`` strips its route before asking
  the ``StoreBackend`` mounted there;
- **value**: a deepagents ``FileData``: ``{"content": str, "encoding": "utf-8",
  "created_at": iso, "modified_at": iso}`` (ISO 8601, UTC), plus a ``memworker`` marker
  ``{"version": n, "sha256": hex}``: which version memworker published, and the hash of its
  content. deepagents ignores the extra key and drops it when an agent rewrites the file.

**Publishing is compare-and-set.** Before overwriting, the sink reads the item: absent, or
still holding the content its marker names, it is memworker's to overwrite; otherwise an agent
changed it and the sink raises :class:`~worker.errors.ExternalEdit` without writing (the
service layer absorbs the edit; see ``worker.service.edits``). The store has no conditional
put, so an agent write landing between the read and the write is the one edit this misses.

>>> from worker.models import Namespace, Scope
>>> store_namespace(Namespace.for_user("ann.lee@example.com"))
('_default', 'ann~lee@example~com', 'memories')
>>> store_namespace(Namespace.for_org("acme"))
('acme', '_org', 'memories')
>>> store_key("/memories/topics/projects.md")
'/topics/projects.md'

The source: the SDK's ``threads.search`` has no ``updated_after`` filter, so
:func:`collect_threads` sorts by ``updated_at`` descending and pages until it passes the window
start (paging while threads are updated can show a thread twice, harmless, but never hides
one). It cuts each thread's ``values["messages"]`` into exchanges (user input + final assistant
reply; see :mod:`worker.models`) and makes one ``turn`` candidate per complete exchange after
the thread's cursor, ``occurred_at`` the thread state's time (never after the scan): messages
carry no time of their own. The idempotency key ``thread:<thread_id>:<message id>`` is the
capture middleware's too, so a turn captured live and found again by a scan is one candidate;
an exchange still waiting for its final reply is left for a later scan.

**Whose thread it is** comes from what the server vouches for, never from metadata a client
can set (:func:`worker.types.thread_owner`, the rule runs follow too): the owner the
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
from typing import Any, Final, Protocol

import httpx
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import LangGraphError, NotFoundError

from worker.connectors.base import PublishedFile
from worker.connectors.layout import (
    DEFAULT_USER_TEMPLATE,
    DOT_REPLACEMENT,
    NO_ASSISTANT_LABEL,
    NO_ORG_LABEL,
    ORG_ASSISTANT_LABEL,
    SHARED_USER_LABEL,
    StoreLayout,
    content_sha256,
    fill,
    item_content,
    sanitise_label,
    store_key,
)
from worker.errors import (
    ConfigurationError,
    ExternalEdit,
    IdentityMismatch,
    InvalidCandidate,
    SinkError,
    UnknownOwner,
)
from worker.models import Candidate, Namespace, Scope, make_candidate, split_exchanges, validate_id
from worker.types import MAX_TEXT_BYTES, OWNER_KEY, USER_KEY, Identity, SinkSettings, thread_owner

__all__ = [
    "DEFAULT_NAMESPACE_TEMPLATE",
    "DOT_REPLACEMENT",
    "MARKER_KEY",
    "NO_ASSISTANT_LABEL",
    "NO_ORG_LABEL",
    "ORG_ASSISTANT_LABEL",
    "SHARED_USER_LABEL",
    "LangGraphStoreSink",
    "StoreLayout",
    "content_sha256",
    "file_data",
    "item_content",
    "sanitise_label",
    "store_key",
    "store_namespace",
]


#: The default user-memory template (each scope has its own; see ``StoreLayout``).
DEFAULT_NAMESPACE_TEMPLATE: Final = DEFAULT_USER_TEMPLATE

#: The key of memworker's marker inside a published ``FileData`` value.
MARKER_KEY: Final = "memworker"

#: Seconds before a store call is abandoned (the outbox retries); the SDK's own default read
#: timeout is minutes, far too long to hold a delivery worker.
DEFAULT_TIMEOUT_SECONDS: Final = 10.0
#: The store's answer for an item it does not hold.
NOT_FOUND: Final = 404
#: Items read per page when an erase lists a namespace's inbox.
INBOX_PAGE_SIZE: Final = 100

_DEFAULT_LAYOUT: Final = StoreLayout()


def store_namespace(
    namespace: Namespace | str, template: Sequence[str] | None = None
) -> tuple[str, ...]:
    """The store namespace tuple of a memory namespace: by the default layout's template of its
    scope, or by ``template`` when given. Use the same function in an agent's namespace factory
    (or :mod:`worker.integrations.deepagents`, which builds the factories for you)."""
    ns = Namespace.parse(namespace) if isinstance(namespace, str) else namespace
    if template is None:
        return _DEFAULT_LAYOUT.namespace_for(ns)
    return fill(template, ns)


def file_data(item: PublishedFile) -> dict[str, Any]:
    """The deepagents ``FileData`` value of a published version, with memworker's marker."""
    return {
        "content": item.content,
        "encoding": "utf-8",
        "created_at": _iso(item.created_at),
        "modified_at": _iso(item.modified_at),
        MARKER_KEY: {"version": item.version, "sha256": content_sha256(item.content)},
    }


def published_version(value: Mapping[str, Any]) -> int | None:
    """The version memworker's marker names, when the stored content is still that version's."""
    marker = value.get(MARKER_KEY)
    if not isinstance(marker, Mapping):
        return None
    version, sha = marker.get("version"), marker.get("sha256")
    if not isinstance(version, int) or sha != content_sha256(item_content(value)):
        return None
    return version


class LangGraphStoreSink:
    """Publish to a LangGraph server's store via langgraph-sdk (see the module docstring).

    Args:
        client_or_url: a ``SyncLangGraphClient`` or the server's URL.
        layout: namespace templates and routes per scope (validated when built; default
            :class:`StoreLayout`'s defaults).
        api_key: the server's API key when a URL is given (never read from the environment).
        timeout: seconds per store call when a URL is given.
    """

    name = "langgraph"

    def __init__(
        self,
        client_or_url: SyncLangGraphClient | str,
        layout: StoreLayout | None = None,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.layout = layout or _DEFAULT_LAYOUT
        self.timeout_seconds = timeout
        self._owns_client = isinstance(client_or_url, str)
        if isinstance(client_or_url, str):
            self.client = _client(client_or_url, api_key, timeout)
        else:
            self.client = client_or_url

    @classmethod
    def from_settings(cls, settings: SinkSettings) -> LangGraphStoreSink:
        """The sink for ``settings.langgraph_url``; ConfigurationError when it is unset or the
        store layout could let two namespaces share a tuple."""
        if not settings.langgraph_url:
            raise ConfigurationError(
                "sink 'langgraph' needs MEMWORKER_LANGGRAPH_URL (the LangGraph API server)"
            )
        return cls(
            settings.langgraph_url,
            StoreLayout.from_settings(settings),
            api_key=settings.langgraph_api_key,
            timeout=settings.sink_timeout_seconds,
        )

    def close(self) -> None:
        """Close the HTTP connections of a client this sink built from a URL."""
        if self._owns_client:
            self.client.close()

    def namespace_for(self, namespace: str) -> tuple[str, ...]:
        """The store namespace this sink writes a memory namespace's files to."""
        try:
            return self.layout.namespace_for(namespace)
        except InvalidCandidate as exc:
            raise SinkError(f"langgraph sink: {exc}") from None

    def key_for(self, namespace: str, path: str) -> str:
        try:
            return self.layout.key_for(namespace, path)
        except InvalidCandidate as exc:
            raise SinkError(f"langgraph sink: {exc}") from None

    def deliver(self, item: PublishedFile) -> None:
        """Publish ``item`` unless the store holds content memworker did not publish there
        (then :class:`ExternalEdit`, nothing written)."""
        if item.deleted:
            self.erase(item.namespace, [item.path])
            return
        self._put(item, self._current(item.namespace, item.path), expected_sha256=None)

    def overwrite(self, item: PublishedFile, *, expected_sha256: str) -> None:
        """Publish ``item`` over content whose hash is ``expected_sha256`` (an external edit that
        was absorbed); :class:`ExternalEdit` when the store has changed again since."""
        self._put(item, self._current(item.namespace, item.path), expected_sha256=expected_sha256)

    def read(self, namespace: str, path: str) -> Mapping[str, Any] | None:
        """The stored value of ``path``, or ``None`` when there is none."""
        return self._current(namespace, path)

    def external_edit(self, item: PublishedFile, *, timeout: float) -> ExternalEdit | None:
        """What an agent wrote over ``item``'s path, or ``None`` when the store holds
        memworker's content or nothing; one read, cut off after ``timeout`` seconds (a
        per-request limit on the SDK's own connection pool, which has no such argument)."""
        store_ns, key = self.namespace_for(item.namespace), self.key_for(item.namespace, item.path)
        params = {"key": key, "namespace": ".".join(store_ns)}
        try:
            response = self.client.http.client.get("/store/items", params=params, timeout=timeout)
            if response.status_code == NOT_FOUND:
                return None
            response.raise_for_status()
            found = response.json()
        except (httpx.HTTPError, OSError, ValueError) as exc:
            raise SinkError(_describe("get", item.path, exc)) from exc
        value = found.get("value") if isinstance(found, Mapping) else None
        return _edit_of(item, value if isinstance(value, Mapping) else None)

    def _current(self, namespace: str, path: str) -> Mapping[str, Any] | None:
        store_ns, key = self.namespace_for(namespace), self.key_for(namespace, path)
        try:
            found = self.client.store.get_item(store_ns, key=key)
        except NotFoundError:
            return None
        except (LangGraphError, httpx.HTTPError, OSError) as exc:
            raise SinkError(_describe("get", path, exc)) from exc
        value = found.get("value") if isinstance(found, Mapping) else None
        return value if isinstance(value, Mapping) else None

    def _put(
        self,
        item: PublishedFile,
        current: Mapping[str, Any] | None,
        *,
        expected_sha256: str | None,
    ) -> None:
        edit = _edit_of(item, current)
        if edit is not None and content_sha256(edit.content) != expected_sha256:
            raise edit
        store_ns, key = self.namespace_for(item.namespace), self.key_for(item.namespace, item.path)
        try:
            self.client.store.put_item(store_ns, key=key, value=file_data(item))
        except (LangGraphError, httpx.HTTPError, OSError) as exc:
            raise SinkError(_describe("put", item.path, exc)) from exc

    def remove_item(self, store_namespace: Sequence[str], key: str) -> bool:
        """Delete one item by its raw namespace and key (the layout migration's old items);
        False when it was not there."""
        try:
            self.client.store.delete_item(tuple(store_namespace), key=key)
        except NotFoundError:
            return False
        except (LangGraphError, httpx.HTTPError, OSError) as exc:
            raise SinkError(_describe("delete", key, exc)) from exc
        return True

    def raw_item(self, store_namespace: Sequence[str], key: str) -> Mapping[str, Any] | None:
        """The value stored at this raw namespace and key, or ``None``."""
        try:
            found = self.client.store.get_item(tuple(store_namespace), key=key)
        except NotFoundError:
            return None
        except (LangGraphError, httpx.HTTPError, OSError) as exc:
            raise SinkError(_describe("get", key, exc)) from exc
        value = found.get("value") if isinstance(found, Mapping) else None
        return value if isinstance(value, Mapping) else {}

    def has_item(self, store_namespace: Sequence[str], key: str) -> bool:
        """Whether an item is stored at this raw namespace and key."""
        return self.raw_item(store_namespace, key) is not None

    def erase_agent_writes(self, namespaces: Sequence[str]) -> int:
        """Delete every inbox item agents wrote for the user namespaces among ``namespaces``
        (the other scopes have no inbox); returns how many went."""
        removed = 0
        for key in namespaces:
            if Namespace.parse(key).scope is not Scope.USER:
                continue
            store_ns = self.namespace_for(key)
            removed += sum(self.remove_item(store_ns, item) for item in self._inbox_keys(store_ns))
        return removed

    def _inbox_keys(self, store_ns: tuple[str, ...]) -> list[str]:
        """Keys of the inbox items directly in ``store_ns`` (not in deeper namespaces)."""
        prefix, keys, offset = self.layout.inbox_prefix, [], 0
        while True:
            try:
                page = self.client.store.search_items(
                    list(store_ns), limit=INBOX_PAGE_SIZE, offset=offset
                )
            except (LangGraphError, httpx.HTTPError, OSError) as exc:
                raise SinkError(_describe("list", prefix, exc)) from exc
            items = page.get("items", []) if isinstance(page, Mapping) else []
            keys += [
                str(item.get("key", ""))
                for item in items
                if tuple(item.get("namespace") or ()) == store_ns
                and str(item.get("key", "")).startswith(prefix)
            ]
            if len(items) < INBOX_PAGE_SIZE:
                return keys
            offset += INBOX_PAGE_SIZE

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        """Delete these paths' items, whoever wrote them last (an erase is final)."""
        store_ns = self.namespace_for(namespace)
        keys = [self.key_for(namespace, p) for p in paths]
        for path, key in zip(paths, keys, strict=True):
            try:
                self.client.store.delete_item(store_ns, key=key)
            except NotFoundError:
                continue  # already gone: erase is idempotent
            except (LangGraphError, httpx.HTTPError, OSError) as exc:
                raise SinkError(_describe("delete", path, exc)) from exc


def _edit_of(item: PublishedFile, current: Mapping[str, Any] | None) -> ExternalEdit | None:
    """The external edit ``current`` is over ``item``: content that is neither the version its
    marker names nor ``item``'s own; ``None`` when absent or memworker's."""
    if current is None:
        return None
    content = item_content(current)
    if published_version(current) is not None or content == item.content:
        return None
    marker = current.get(MARKER_KEY)
    last = marker.get("version") if isinstance(marker, Mapping) else None
    return ExternalEdit(item.namespace, item.path, content, last if isinstance(last, int) else None)


def _client(url: str, api_key: str | None, timeout: float) -> SyncLangGraphClient:
    """An SDK client without transport-level retries: ``get_sync_client`` retries a refused
    connection five times with backoff (seconds per attempt), while the outbox already retries
    with its own backoff, so a down server should fail one delivery fast."""
    headers = {"x-api-key": api_key} if api_key else {}
    http = httpx.Client(
        base_url=url,
        transport=httpx.HTTPTransport(retries=0),
        timeout=httpx.Timeout(timeout),
        headers=headers,
    )
    return SyncLangGraphClient(http)


def _iso(value: datetime) -> str:
    if value.tzinfo is None:
        raise SinkError("langgraph sink: timestamps must be timezone-aware")
    return value.astimezone(UTC).isoformat()


def _describe(action: str, path: str, exc: BaseException) -> str:
    # The class name and status only: messages can echo URLs with credentials in them.
    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = f"HTTP {status}" if isinstance(status, int) else type(exc).__name__
    return f"langgraph sink: {action} {path} failed ({detail}); the outbox will retry"


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
    """A LangGraph server's threads as a :class:`~worker.connectors.base.ThreadSource`.

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
