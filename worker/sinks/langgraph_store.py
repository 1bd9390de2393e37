"""Publish memory files to a LangGraph server's store, in the form deep agents read.

Each version becomes one store item:

- **namespace**: the template (default ``("{assistant_id}", "{user_id}", "memories")``) filled
  from the memory's namespace by :func:`store_namespace`;
- **key**: the path relative to the route, ``/memories/preferences.md`` → ``/preferences.md``,
  because a deepagents ``CompositeBackend`` strips its route before asking the
  ``StoreBackend`` mounted there;
- **value**: a deepagents ``FileData``: ``{"content": str, "encoding": "utf-8",
  "created_at": iso, "modified_at": iso}`` (ISO 8601, UTC). Content is one string: deepagents
  0.7 reads a string (it still accepts a legacy list of lines, but no longer writes one).

An agent reads these files with::

    StoreBackend(namespace=lambda rt: store_namespace(Namespace.for_user(rt.context.user_id)))

mounted at ``/memories/`` of a ``CompositeBackend`` and ``memory=["/memories/preferences.md"]``.

Filling the template: ``{user_id}``, ``{assistant_id}``, ``{org_id}`` and ``{scope}`` come from
the namespace. An id the namespace does not have becomes a marker starting with ``_``, which
no real id can start with (ids start with a letter or digit), so scopes never collide:

====================  ==========================  =================  ===========
namespace             ``{assistant_id}``          ``{user_id}``      ``{org_id}``
====================  ==========================  =================  ===========
``user:u1``           ``_default``                ``u1``             ``_none``
``user:u1:bot``       ``bot``                     ``u1``             ``_none``
``agent:bot``         ``bot``                     ``_shared``        ``_none``
``org:acme``          ``_org``                    ``_shared``        ``acme``
====================  ==========================  =================  ===========

Labels are then sanitised by :func:`sanitise_label`: the SDK refuses ``.`` in a namespace
label, so every ``.`` becomes ``~`` — ids never contain ``~``, so two ids never share a label.

>>> from worker.models import Namespace
>>> store_namespace(Namespace.for_user("ann.lee@example.com"))
('_default', 'ann~lee@example~com', 'memories')
>>> store_key("/memories/topics/projects.md")
'/topics/projects.md'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import httpx
from langgraph_sdk.client import SyncLangGraphClient
from langgraph_sdk.errors import LangGraphError, NotFoundError

from worker.constants import MEMORY_ROUTE
from worker.errors import ConfigurationError, InvalidCandidate, SinkError
from worker.models import Namespace, Scope
from worker.settings import Settings
from worker.sinks.base import PublishedFile

#: The default store namespace: per assistant, per user, then a fixed "memories" folder.
DEFAULT_NAMESPACE_TEMPLATE: Final = ("{assistant_id}", "{user_id}", "memories")

#: ``{assistant_id}`` of a user namespace without an assistant.
NO_ASSISTANT_LABEL: Final = "_default"
#: ``{assistant_id}`` of an org namespace.
ORG_ASSISTANT_LABEL: Final = "_org"
#: ``{user_id}`` of the shared (agent and org) scopes.
SHARED_USER_LABEL: Final = "_shared"
#: ``{org_id}`` of user and agent namespaces.
NO_ORG_LABEL: Final = "_none"

#: What the SDK forbids in a label (``.``) is replaced by this, which no id may contain.
DOT_REPLACEMENT: Final = "~"

#: Characters deepagents' ``StoreBackend`` accepts in a label, minus ``.`` which the SDK rejects.
_LABEL_PATTERN: Final = re.compile(r"^[A-Za-z0-9\-_@+:~]+$")
_FIELDS: Final = frozenset({"user_id", "assistant_id", "org_id", "scope"})

#: Seconds before a store call is abandoned (the outbox retries); the SDK's own default read
#: timeout is minutes, far too long to hold a delivery worker.
DEFAULT_TIMEOUT_SECONDS: Final = 10.0


def sanitise_label(value: str) -> str:
    """A store namespace label for ``value``: every ``.`` becomes ``~``.

    >>> sanitise_label("support.bot")
    'support~bot'
    """
    label = value.replace(".", DOT_REPLACEMENT)
    if not _LABEL_PATTERN.fullmatch(label):
        raise ConfigurationError(
            f"store namespace label {value!r} has characters outside [A-Za-z0-9_@+:~.-]"
        )
    return label


def store_namespace(
    namespace: Namespace | str, template: Sequence[str] = DEFAULT_NAMESPACE_TEMPLATE
) -> tuple[str, ...]:
    """The store namespace tuple of a memory namespace (see the module docstring).

    Use the same function in the agent's ``StoreBackend`` namespace factory.
    """
    ns = Namespace.parse(namespace) if isinstance(namespace, str) else namespace
    values = {
        "scope": ns.scope.value,
        "user_id": ns.user_id or SHARED_USER_LABEL,
        "assistant_id": ns.assistant_id
        or (ORG_ASSISTANT_LABEL if ns.scope is Scope.ORG else NO_ASSISTANT_LABEL),
        "org_id": ns.org_id or NO_ORG_LABEL,
    }
    return tuple(sanitise_label(part.format(**values)) for part in template)


def store_key(path: str, route: str = MEMORY_ROUTE) -> str:
    """The item key of a memory path: the path relative to ``route``, with a leading slash."""
    if not path.startswith(route) or len(path) == len(route):
        raise SinkError(f"langgraph sink: path {path!r} is not a file under {route}")
    return "/" + path[len(route) :]


def file_data(item: PublishedFile) -> dict[str, Any]:
    """The deepagents ``FileData`` value of a published version."""
    return {
        "content": item.content,
        "encoding": "utf-8",
        "created_at": _iso(item.created_at),
        "modified_at": _iso(item.modified_at),
    }


class LangGraphStoreSink:
    """Publish to a LangGraph server's store via langgraph-sdk (see the module docstring).

    Args:
        client_or_url: a ``SyncLangGraphClient`` or the server's URL.
        namespace_template: store namespace template; fields ``{user_id}``,
            ``{assistant_id}``, ``{org_id}``, ``{scope}``.
        route: where the agent mounts its ``StoreBackend``; stripped from paths to make keys.
        api_key: the server's API key when a URL is given (never read from the environment).
        timeout: seconds per store call when a URL is given.
    """

    name = "langgraph"

    def __init__(
        self,
        client_or_url: SyncLangGraphClient | str,
        namespace_template: Sequence[str] = DEFAULT_NAMESPACE_TEMPLATE,
        route: str = MEMORY_ROUTE,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        if not route.startswith("/") or not route.endswith("/"):
            raise ConfigurationError(f"langgraph sink route {route!r} must start and end with '/'")
        template = tuple(namespace_template)
        if not template:
            raise ConfigurationError("langgraph sink namespace template is empty")
        for part in template:
            fields = set(re.findall(r"{([^{}]*)}", part))
            if not fields <= _FIELDS:
                raise ConfigurationError(
                    f"store namespace template part {part!r} uses {sorted(fields - _FIELDS)}; "
                    f"known fields: {sorted(_FIELDS)}"
                )
        self.namespace_template = template
        self.route = route
        if isinstance(client_or_url, str):
            self.client = _client(client_or_url, api_key, timeout)
        else:
            self.client = client_or_url

    @classmethod
    def from_settings(cls, settings: Settings) -> LangGraphStoreSink:
        """The sink for ``settings.langgraph_url``; ConfigurationError when it is unset."""
        if not settings.langgraph_url:
            raise ConfigurationError(
                "sink 'langgraph' needs MEMWORKER_LANGGRAPH_URL (the LangGraph API server)"
            )
        return cls(
            settings.langgraph_url,
            namespace_template=settings.store_namespace,
            api_key=settings.langgraph_api_key,
        )

    def namespace_for(self, namespace: str) -> tuple[str, ...]:
        """The store namespace this sink writes a memory namespace's files to."""
        try:
            return store_namespace(namespace, self.namespace_template)
        except InvalidCandidate as exc:
            raise SinkError(f"langgraph sink: {exc}") from None

    def deliver(self, item: PublishedFile) -> None:
        if item.deleted:
            self.erase(item.namespace, [item.path])
            return
        namespace = self.namespace_for(item.namespace)
        key = store_key(item.path, self.route)
        try:
            self.client.store.put_item(namespace, key=key, value=file_data(item))
        except (LangGraphError, httpx.HTTPError, OSError) as exc:
            raise SinkError(_describe("put", item.path, exc)) from exc

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        store_ns = self.namespace_for(namespace)
        keys = [store_key(p, self.route) for p in paths]
        for path, key in zip(paths, keys, strict=True):
            try:
                self.client.store.delete_item(store_ns, key=key)
            except NotFoundError:
                continue  # already gone: erase is idempotent
            except (LangGraphError, httpx.HTTPError, OSError) as exc:
                raise SinkError(_describe("delete", path, exc)) from exc


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
