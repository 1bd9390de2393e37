"""Publish memory files to a LangGraph server's store, in the form deep agents read.

Each version becomes one store item, placed by the :class:`StoreLayout`
(:mod:`worker.store_layout`: one namespace template and route per scope, validated
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
changed it and the sink raises :class:`~worker.errors.ExternalEdit` with what the store holds,
without writing (the service layer absorbs the edit; see ``worker.service.agent_edits``). The
read and the write are two calls (the store has no conditional put), so an agent write landing
between them in the same few milliseconds is the one edit this check cannot see.

>>> from worker.models import Namespace, Scope
>>> store_namespace(Namespace.for_user("ann.lee@example.com"))
('_default', 'ann~lee@example~com', 'memories')
>>> store_namespace(Namespace.for_org("acme"))
('acme', '_org', 'memories')
>>> store_key("/memories/topics/projects.md")
'/topics/projects.md'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import httpx
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import LangGraphError, NotFoundError

from worker.errors import ConfigurationError, ExternalEdit, InvalidCandidate, SinkError
from worker.models import Namespace, Scope
from worker.sinks.base import PublishedFile
from worker.slices import SinkSettings
from worker.store_layout import (
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
