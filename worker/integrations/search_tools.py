"""Tool mode: ``search_memory`` and ``read_memory`` over the user's committed memory.

Beside ``remember``/``forget`` (which enqueue candidates), these read what consolidation
committed. The namespace comes from the run — the user by the one identity rule
(:func:`~worker.integrations.capture.tool_user`: the authenticated identity on a server that
authenticates, else the user id in the tool runtime's context, ``configurable`` or metadata),
and the assistant given here — never from the model's arguments, so neither a prompt nor a
run's context can read another user's memory (a mismatch is refused: nothing is read).

The tools need something that **offers search** (:class:`MemorySearch`); the SQL-backed one is
:class:`worker.service.memory_search.SqlMemorySearch`. Building the tools without one, or with
one that declares ``supports_search = False``, is a :class:`~worker.errors.ConfigurationError`
at start-up rather than a tool that fails in every conversation.

>>> make_search_tools(None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
worker.errors.ConfigurationError: search_memory needs a memory search backend...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from worker.errors import ConfigurationError, IdentityMismatch, InvalidCandidate, MemworkerError
from worker.integrations.capture import TOOLS_INTEGRATION, UserIdFrom, tool_identity
from worker.integrations.enqueuer import report_refused
from worker.models import normalise_path
from worker.values import MemoryHit

#: Hits one search returns by default: enough to answer, short enough for a tool result.
DEFAULT_LIMIT: Final = 5

SEARCH_DESCRIPTION: Final = (
    "Search what you remember about the user (their committed memory). `query`: words to look "
    "for. Returns matching memories with the file each is in."
)
READ_DESCRIPTION: Final = (
    "Read one of the user's memory files in full. `path`: e.g. 'preferences' or "
    "'/memories/preferences.md'."
)


@runtime_checkable
class MemorySearch(Protocol):
    """Searches and reads one namespace's committed memory."""

    def search(self, namespace: str, query: str, *, limit: int) -> Sequence[MemoryHit]: ...

    def read(self, namespace: str, path: str) -> str | None: ...


def make_search_tools(
    search: MemorySearch | None,
    *,
    user_id_from: UserIdFrom | None = None,
    assistant_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
) -> list[BaseTool]:
    """``search_memory`` and ``read_memory`` tools over ``search`` (see the module docstring)."""
    if not isinstance(search, MemorySearch) or getattr(search, "supports_search", True) is False:
        raise ConfigurationError(
            "search_memory needs a memory search backend (e.g. "
            "worker.service.memory_search.SqlMemorySearch over the memory store); "
            f"{type(search).__name__} offers no search"
        )

    def namespace_of(runtime: ToolRuntime[Any, Any], done: str) -> tuple[str | None, str]:
        """``(the user's namespace, "")``, or ``(None, why nothing was <done>)`` when no user is
        known or the run names another user than the authenticated one (refused, counted)."""
        try:
            identity = tool_identity(runtime, user_id_from)
        except IdentityMismatch as exc:
            report_refused(TOOLS_INTEGRATION, exc)
            return None, f"Refused: this conversation names another user; nothing was {done}."
        if identity.user_id is None:
            return None, f"No user is known for this conversation; nothing was {done}."
        return identity.user_namespace(assistant_id).key, ""

    def search_memory(query: str, runtime: ToolRuntime[Any, Any]) -> str:
        namespace, why = namespace_of(runtime, "searched")
        if namespace is None:
            return why
        try:
            hits = search.search(namespace, query, limit=limit)
        except MemworkerError:
            return "Memory cannot be searched right now."
        if not hits:
            return "Nothing in memory matches."
        return "\n".join(f"- {hit.text} ({hit.path})" for hit in hits)

    def read_memory(path: str, runtime: ToolRuntime[Any, Any]) -> str:
        namespace, why = namespace_of(runtime, "read")
        if namespace is None:
            return why
        try:
            wanted = normalise_path(path)
        except InvalidCandidate as exc:
            return f"Not a memory path: {exc}"
        try:
            content = search.read(namespace, wanted)
        except MemworkerError:
            return "Memory cannot be read right now."
        return content if content is not None else f"There is no memory file {wanted}."

    return [
        StructuredTool.from_function(
            func=search_memory, name="search_memory", description=SEARCH_DESCRIPTION
        ),
        StructuredTool.from_function(
            func=read_memory, name="read_memory", description=READ_DESCRIPTION
        ),
    ]
