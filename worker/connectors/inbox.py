"""Read what agents wrote to their inbox (``/memories/inbox/…``) into ``fact`` candidates.

The inbox is the append-log pattern: an agent writes a small file per thread or event — e.g.
``/memories/inbox/<thread_id>/<anything>.md`` or ``/memories/inbox/<date>-<thread_id>.md`` —
and memworker dedupes and merges it into the stable files, then removes it. The helper's
permissions let agents write there freely.

:meth:`LangGraphInbox.collect` pages through the user namespaces of the store
(``list_namespaces``) and each one's items (``search_items``), and returns four things for
the caller to act on in order (at-least-once, never lost):

1. ``candidates``: one ``fact`` per line of each new or changed inbox item (bullets and
   headings stripped), source ``inbox``, its thread as provenance, ids deterministic in
   (namespace, key, content hash, line) — a re-read of the same item adds nothing; each is
   ``occurred_at`` the item's last write (its ``updated_at``, never after the scan), since
   the lines were said by then, not when the scan found them;
2. ``cursor_updates``: per namespace, the items consumed (key → content hash and candidate
   ids); record them only after the candidates are enqueued;
3. ``removable``: items consumed by an earlier scan whose candidates the caller confirms are
   merged (``merged``); delete them only if the store still holds the same content;
4. ``set_aside``: items over the bounds (:data:`~worker.types.MAX_INBOX_ITEM_BYTES`,
   :data:`~worker.types.MAX_INBOX_ITEM_LINES`), each with its reason. An item is measured
   before any work on it (:func:`~worker.connectors.layout.bounded_lines`: its length, then one
   split into lines), so a dump costs a scan no more than its length; it is never enqueued in
   part and never removed. Its cursor record remembers it (its ``updated_at`` and content
   hash, with the reason), so later scans report it again without reading it until the agent
   changes it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import httpx
from langgraph_sdk.errors import LangGraphError, NotFoundError

from worker.connectors.layout import StoreLayout, bounded_lines, content_sha256, item_content
from worker.errors import InvalidCandidate, SinkError
from worker.models import Candidate, Namespace, make_candidate, validate_id
from worker.types import MAX_INBOX_ITEM_BYTES, MAX_INBOX_ITEM_LINES

logger = logging.getLogger(__name__)

#: The cursor-store ``source`` of this module's per-namespace cursors.
CURSOR_SOURCE: Final = "inbox"
#: Namespaces / items per store page.
PAGE_SIZE: Final = 100
_DATE_PREFIX: Final = re.compile(r"^\d{4}-\d{2}-\d{2}(?:T[\d:]+Z?)?-")


class CursorStore(Protocol):
    def get_cursor(self, source: str, key: str) -> str | None: ...


@dataclass
class InboxScan:
    """What one inbox scan found (see the module docstring for the order of the steps)."""

    candidates: list[Candidate] = field(default_factory=list)
    #: memory namespace -> {item key: {"sha256": ..., "ids": [...]}} to record after enqueue.
    cursor_updates: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: (store namespace, key, content hash) of consumed items whose merge is confirmed.
    removable: list[tuple[tuple[str, ...], str, str]] = field(default_factory=list)
    #: (memory namespace, item key, reason) of the items over the bounds, left in the inbox.
    set_aside: list[tuple[str, str, str]] = field(default_factory=list)
    namespaces_seen: int = 0


class LangGraphInbox:
    """The LangGraph store's inbox route as a :class:`~worker.connectors.base.InboxSource`.

    Args:
        client: a langgraph-sdk ``SyncLangGraphClient`` (the store sink's, with its deadline).
        layout: the store layout the sink publishes under (it names the inbox route).
        max_text_bytes: the longest candidate text (the deployment's limit).
    """

    cursor_source = CURSOR_SOURCE

    def __init__(self, client: Any, layout: StoreLayout, *, max_text_bytes: int) -> None:
        self.client = client
        self.layout = layout
        self.max_text_bytes = max_text_bytes

    def collect(
        self,
        *,
        cursors: CursorStore,
        merged: Callable[[str, Sequence[str]], bool],
        now: datetime,
        trace_id: str,
    ) -> InboxScan:
        """Scan every user namespace's inbox (see the module docstring)."""
        scan = InboxScan()
        prefix = self.layout.inbox_prefix
        for store_ns in _namespaces(self.client, PAGE_SIZE):
            namespace = self.layout.parse_user(store_ns)
            if namespace is None:
                continue
            scan.namespaces_seen += 1
            raw = cursors.get_cursor(CURSOR_SOURCE, namespace.key)
            consumed: dict[str, dict[str, Any]] = json.loads(raw) if raw else {}
            updates = dict(consumed)
            for key, content, updated in _inbox_items(self.client, store_ns, prefix, PAGE_SIZE):
                seen = consumed.get(key)
                remembered = _set_aside_reason(seen, updated)
                if remembered is not None:
                    # Set aside by an earlier scan and unchanged since: reported, not read.
                    scan.set_aside.append((namespace.key, key, remembered))
                    continue
                lines, refused = bounded_lines(
                    content, max_bytes=MAX_INBOX_ITEM_BYTES, max_lines=MAX_INBOX_ITEM_LINES
                )
                sha = content_sha256(content)
                if refused is not None:
                    reason = (
                        f"inbox item has {refused}; left in the inbox, not enqueued (split it "
                        "into smaller items)"
                    )
                    scan.set_aside.append((namespace.key, key, reason))
                    updates[key] = {
                        "sha256": sha, "updated_at": updated, "ids": [], "set_aside": reason
                    }  # fmt: skip
                    continue
                if seen is not None and seen.get("sha256") == sha and "set_aside" not in seen:
                    if merged(namespace.key, seen.get("ids") or []):
                        scan.removable.append((store_ns, key, sha))
                        updates.pop(key, None)
                    continue
                found = _candidates(
                    namespace,
                    key,
                    relative=key[len(prefix) :],
                    lines=lines,
                    sha=sha,
                    now=now,
                    written=_written_at(updated),
                    trace_id=trace_id,
                    max_text_bytes=self.max_text_bytes,
                )
                scan.candidates.extend(found)
                updates[key] = {"sha256": sha, "ids": [c.id for c in found]}
            if updates != consumed:
                scan.cursor_updates[namespace.key] = updates
        return scan

    def owner_of(self, store_namespace: Sequence[str]) -> str | None:
        owner = self.layout.parse_user(tuple(store_namespace))
        return owner.key if owner is not None else None

    def remove_if_unchanged(self, store_namespace: Sequence[str], key: str, sha256: str) -> bool:
        store_ns = tuple(store_namespace)
        try:
            found = self.client.store.get_item(store_ns, key=key)
            value = found.get("value") if isinstance(found, Mapping) else None
            if not isinstance(value, Mapping) or content_sha256(item_content(value)) != sha256:
                return False  # changed since its merge: the agent added to it
            self.client.store.delete_item(store_ns, key=key)
        except NotFoundError:
            return False
        except (LangGraphError, httpx.HTTPError, OSError) as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            detail = f"HTTP {status}" if isinstance(status, int) else type(exc).__name__
            raise SinkError(f"inbox: removing {key} failed ({detail}); kept for now") from exc
        return True


def thread_of(relative: str) -> str | None:
    """The thread an inbox key names: its first folder, or its file name after a date.

    >>> thread_of("t-42/notes.md"), thread_of("2026-01-05-t-42.md"), thread_of("x y.md")
    ('t-42', 't-42', None)
    """
    head = relative.split("/", 1)[0] if "/" in relative else relative.removesuffix(".md")
    head = _DATE_PREFIX.sub("", head)
    try:
        return validate_id(head, "thread_id")
    except InvalidCandidate:
        return None


def inbox_lines(lines: Sequence[str]) -> list[str]:
    """Each distinct non-empty line of ``lines`` (an item's, already within the bounds), in
    order, bullets and headings stripped; deduplicated through a dict, in linear time.

    >>> inbox_lines(["# Notes", "- tea", "* tea", "", "cake"])
    ['tea', 'cake']
    """
    out: dict[str, None] = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line[:2] in ("- ", "* "):
            line = line[2:].strip()
        if line:
            out.setdefault(line, None)
    return list(out)


def _set_aside_reason(seen: Mapping[str, Any] | None, updated: str | None) -> str | None:
    """The reason an earlier scan set the item aside, when its cursor record ``seen`` did so
    at this very ``updated_at`` (the store moves it on every write); else ``None``."""
    if seen is None or updated is None or seen.get("updated_at") != updated:
        return None
    reason = seen.get("set_aside")
    return str(reason) if reason is not None else None


def _candidates(
    namespace: Namespace,
    key: str,
    *,
    relative: str,
    lines: Sequence[str],
    sha: str,
    now: datetime,
    written: datetime | None,
    trace_id: str,
    max_text_bytes: int,
) -> list[Candidate]:
    thread_id = thread_of(relative)
    said = None if written is None else min(written, now)  # the store's clock may run ahead
    found: list[Candidate] = []
    for index, line in enumerate(inbox_lines(lines)):
        try:
            found.append(
                make_candidate(
                    user_id=namespace.user_id,
                    trace_id=trace_id,
                    text=line,
                    assistant_id=namespace.assistant_id,
                    org_id=namespace.org_id,  # the org the store tuple names, if any
                    thread_id=thread_id,
                    idempotency_key=f"inbox:{key}:{sha}:{index}",
                    source="inbox",
                    max_text_bytes=max_text_bytes,
                    now=now,
                    occurred_at=said,
                )
            )
        except InvalidCandidate as exc:
            logger.warning("inbox %s%s: a line was left out: %s", namespace.key, key, exc)
    return found


def _written_at(value: object) -> datetime | None:
    """A store item's ``updated_at`` as an aware time (naive: UTC); ``None`` if unreadable.

    >>> _written_at("2026-01-05T09:30:00+00:00").isoformat(), _written_at(None)
    ('2026-01-05T09:30:00+00:00', None)
    """
    try:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _namespaces(client: Any, page_size: int) -> Iterator[tuple[str, ...]]:
    offset = 0
    while True:
        page = client.store.list_namespaces(limit=page_size, offset=offset)
        names = page.get("namespaces", []) if isinstance(page, Mapping) else page
        for name in names:
            yield tuple(name)
        if len(names) < page_size:
            return
        offset += page_size


def _inbox_items(
    client: Any, store_ns: tuple[str, ...], prefix: str, page_size: int
) -> Iterator[tuple[str, str, str | None]]:
    """(key, content, ``updated_at``) of the inbox items directly in ``store_ns`` (not in
    deeper namespaces)."""
    offset = 0
    while True:
        page = client.store.search_items(list(store_ns), limit=page_size, offset=offset)
        items = page.get("items", []) if isinstance(page, Mapping) else []
        for item in items:
            key = str(item.get("key", ""))
            if tuple(item.get("namespace") or ()) != store_ns or not key.startswith(prefix):
                continue
            value = item.get("value")
            raw = value.get("content") if isinstance(value, Mapping) else None
            if isinstance(raw, str | list):
                updated = item.get("updated_at")
                yield key, item_content(value), str(updated) if updated else None
        if len(items) < page_size:
            return
        offset += page_size
