"""Deep agents: memory wired in one place (routes, namespaces, permissions), the summary flush, and
tools over memory.

Tools: ``search_memory`` and ``read_memory`` read what consolidation committed (beside
``remember``/``forget``, which enqueue candidates). The namespace comes from the run, by the
one identity rule (:func:`~worker.integrations.capture.tool_user`), never from the model's
arguments, so neither a prompt nor a run's context can read another user's memory. The tools
need something that **offers search** (:class:`MemorySearch`, e.g.
:class:`worker.service.search.SqlMemorySearch`); without one, building them is a
:class:`~worker.errors.ConfigurationError` at start-up rather than a tool that fails in every
conversation.

>>> make_search_tools(None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
worker.errors.ConfigurationError: search_memory needs a memory search backend...

The summary flush: ``create_deep_agent`` always installs deepagents' summarisation, and a
middleware passed in ``middleware=[...]`` replaces a built-in one **by name**, so
:class:`DeepAgentSummaryFlush` (deepagents' class, named ``SummarizationMiddleware``) takes its
place instead of running beside it::

    from deepagents import create_deep_agent
    from deepagents.backends import StateBackend
    from worker.integrations.deepagents import DeepAgentSummaryFlush

    backend = StateBackend()
    agent = create_deep_agent(model=model, backend=backend, middleware=[
        DeepAgentSummaryFlush(model, backend=backend, enqueuer=client, trigger=("tokens", 4000))])

After a compaction the model call succeeded with, the messages it compacted away (those between
the previous event's cutoff and the new one) are enqueued as ``turn`` candidates, keyed like the
capture middleware's. A summary that fails (the model raised, or answered only whitespace)
changes nothing and enqueues nothing: the model is called on the uncompacted context, and the
failure is logged and counted (``memworker_summary_failures_total``). Summary calls are tagged
``middleware:summarize`` and ``nostream``.

Wiring: :func:`memory_backend` returns a :class:`MemworkerMemory` whose parts go straight into
``create_deep_agent``::

    from deepagents import create_deep_agent
    from worker.integrations.deepagents import memory_backend

    memory = memory_backend(assistant_id="support-bot", memory_files=["/memories/preferences.md"])
    agent = create_deep_agent(model=model, **memory.agent_kwargs())
    agent.invoke({"messages": [...]}, context={"user_id": "u1", "org_id": "acme"})

What it sets up, from the same :class:`~worker.connectors.layout.StoreLayout` the store
sink writes with (so reader and writer cannot disagree):

- **routes** of a ``CompositeBackend``: the user's memory at ``/memories/``, the assistant's
  shared memory at ``/shared/``, the organisation's at ``/policies/`` (each a ``StoreBackend``
  over the graph's store; any of the last two can be left out);
- **namespace factories** reading the ids by the one identity rule
  (:func:`~worker.integrations.capture.resolve_identity`), never from the model; a run naming
  anyone else than the authenticated identity is refused
  (:class:`~worker.errors.IdentityMismatch`, nothing read);
- the ``memory=`` paths to load into the system prompt;
- deepagents' own ``permissions=`` rules (first match wins): the inbox (``/memories/inbox/``)
  is writable; files memworker owns under ``/memories/`` are read-only unless
  ``direct_edits=True`` (then memworker absorbs the agent's edits before it publishes again);
  agent-shared and org memory are always read-only; paths in ``approve`` pause for a human
  (``mode="interrupt"``) before the agent writes them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from deepagents import FilesystemPermission
from deepagents.backends import CompositeBackend, StateBackend, StoreBackend
from deepagents.middleware.summarization import (
    SUMMARIZATION_EVENT_KEY,
    SummarizationMiddleware,
)
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool

from worker.connectors.layout import StoreLayout
from worker.errors import ConfigurationError, IdentityMismatch, InvalidCandidate, MemworkerError
from worker.integrations.capture import (
    TOOLS_INTEGRATION,
    AsyncEnqueuer,
    Enqueuer,
    RunIdentity,
    UserIdFrom,
    asubmit,
    current_config,
    report_refused,
    resolve_identity,
    submit,
    tool_identity,
)
from worker.integrations.summary import (
    CheckedSummaries,
    SummaryFailed,
    flush_args,
    summary_failed,
    tag_summary_calls,
)
from worker.models import EnqueueFields, MemoryHit, Namespace, Scope, normalise_path
from worker.types import MAX_TEXT_BYTES

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
            "worker.service.search.SqlMemorySearch over the memory store); "
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


#: Label of this integration in logs and counters.
DEEP_FLUSH_INTEGRATION = "deep_summary_flush"


class DeepAgentSummaryFlush(CheckedSummaries, SummarizationMiddleware):
    """deepagents' ``SummarizationMiddleware`` that flushes what it compacts (module docstring).

    Args:
        model, backend, **summarization: as for deepagents' ``SummarizationMiddleware``.
        enqueuer: the hot-path client (sync or async).
        user_key: the key naming the user in the run's context, ``configurable`` or metadata.
        assistant_id: the per-assistant user namespace, as in the capture middleware.
        max_text_bytes: each exchange's text is shortened to this many bytes.
    """

    def __init__(
        self,
        model: Any,
        *,
        backend: Any,
        enqueuer: Enqueuer | AsyncEnqueuer,
        user_key: str = "user_id",
        assistant_id: str | None = None,
        max_text_bytes: int = MAX_TEXT_BYTES,
        **summarization: Any,
    ) -> None:
        super().__init__(model, backend=backend, **summarization)
        tag_summary_calls(self._lc_helper)
        self.enqueuer = enqueuer
        self.user_key = user_key
        self.assistant_id = assistant_id
        self.max_text_bytes = max_text_bytes

    @property
    def name(self) -> str:
        """The built-in's name, so ``create_deep_agent`` replaces it with this one."""
        return "SummarizationMiddleware"

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        try:
            response = super().wrap_model_call(request, handler)
        except SummaryFailed as exc:
            summary_failed(DEEP_FLUSH_INTEGRATION, exc)
            return handler(request.override(messages=self._get_effective_messages(request)))
        for args in self._compacted(request, response):
            submit(self.enqueuer, DEEP_FLUSH_INTEGRATION, **args)
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        try:
            response = await super().awrap_model_call(request, handler)
        except SummaryFailed as exc:
            summary_failed(DEEP_FLUSH_INTEGRATION, exc)
            return await handler(request.override(messages=self._get_effective_messages(request)))
        for args in self._compacted(request, response):
            await asubmit(self.enqueuer, DEEP_FLUSH_INTEGRATION, **args)
        return response

    def _compacted(self, request: ModelRequest, response: Any) -> list[EnqueueFields]:
        """The candidates of the messages a new summarisation event compacted away."""
        if not isinstance(response, ExtendedModelResponse) or response.command is None:
            return []
        update = response.command.update
        event = update.get(SUMMARIZATION_EVENT_KEY) if isinstance(update, Mapping) else None
        if not isinstance(event, Mapping):
            return []
        previous = request.state.get(SUMMARIZATION_EVENT_KEY)
        start = int(previous["cutoff_index"]) if isinstance(previous, Mapping) else 0
        messages = list(request.state.get("messages") or [])
        removed = messages[start : int(event["cutoff_index"])]
        return flush_args(
            removed,
            request.runtime,
            user_key=self.user_key,
            assistant_id=self.assistant_id,
            max_text_bytes=self.max_text_bytes,
            integration=DEEP_FLUSH_INTEGRATION,
        )


NamespaceFactory = Callable[[Any], tuple[str, ...]]

#: Where the agent sees each scope's memory by default.
USER_MOUNT = "/memories/"
AGENT_MOUNT = "/shared/"
ORG_MOUNT = "/policies/"
#: What the org route reads in a run that names no organisation: a tuple no memory namespace
#: maps to (its first label is a marker no id can be), so nothing is found there.
NO_ORG_NAMESPACE = ("_none", "_no_org")


@dataclass(frozen=True)
class MemworkerMemory:
    """The parts of a deep agent that read (and may write) memworker's memory.

    Args:
        layout: the store layout; use the worker's (``StoreLayout.from_settings``).
        assistant_id: the assistant whose per-assistant user memory and shared memory this
            agent reads (the value the capture middleware and the thread scan use); ``None``:
            the user's memory without an assistant, and no shared memory.
        user_key, org_key: the keys naming the user and the organisation in the run.
        user_mount, agent_mount, org_mount: where the agent sees each scope (``None``: not
            mounted; the agent mount needs an ``assistant_id``).
        memory_files: agent paths loaded into the system prompt (``memory=``).
        direct_edits: let the agent edit the files memworker publishes (absorbed as candidates
            before the next publish; with ``MEMWORKER_DIRECT_EDITS`` set for memworker, merged
            at the namespace's next consolidation) instead of refusing those writes.
        approve: agent path patterns whose writes wait for human approval.
    """

    layout: StoreLayout = field(default_factory=StoreLayout)
    assistant_id: str | None = None
    user_key: str = "user_id"
    org_key: str = "org_id"
    user_mount: str = USER_MOUNT
    agent_mount: str | None = AGENT_MOUNT
    org_mount: str | None = ORG_MOUNT
    memory_files: tuple[str, ...] = ("/memories/preferences.md",)
    direct_edits: bool = False
    approve: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.assistant_id is None:
            object.__setattr__(self, "agent_mount", None)
        mounts = self.mounts()
        for mount in mounts:
            if not mount.startswith("/") or not mount.endswith("/"):
                raise ConfigurationError(f"mount {mount!r} must start and end with '/'")
        if len(set(mounts)) != len(mounts):
            raise ConfigurationError(f"memory mounts {mounts} must be distinct")
        for path in self.memory_files:
            if not any(path.startswith(m) for m in mounts):
                raise ConfigurationError(f"memory file {path!r} is under none of {mounts}")

    def mounts(self) -> list[str]:
        return [m for m in (self.user_mount, self.agent_mount, self.org_mount) if m is not None]

    @property
    def inbox_mount(self) -> str:
        """Where the agent writes inbox items (``/memories/inbox/`` by default)."""
        return self.user_mount + self.layout.inbox_prefix.lstrip("/")

    # --- namespaces ---------------------------------------------------------------------------
    def namespace(self, scope: Scope) -> NamespaceFactory:
        """The ``StoreBackend`` namespace factory of ``scope``'s memory."""

        def factory(runtime: Any) -> tuple[str, ...]:
            if scope is Scope.ORG and self._find(runtime, "organisation") is None:
                return NO_ORG_NAMESPACE  # a run of no organisation reads no org memory
            return self.layout.namespace_for(self.memory_namespace(scope, runtime))

        return factory

    def memory_namespace(self, scope: Scope, runtime: Any) -> Namespace:
        """The memory namespace of ``scope`` for the run ``runtime`` belongs to.

        Raises :class:`~worker.errors.IdentityMismatch` when the run names another user or
        organisation than the server authenticated (nothing is read then)."""
        if scope is Scope.AGENT:
            if self.assistant_id is None:
                raise ConfigurationError("agent memory needs the helper's assistant_id")
            return Namespace.for_agent(self.assistant_id)
        if scope is Scope.ORG:
            return Namespace.for_org(self._id(runtime, self.org_key, "organisation"))
        self._id(runtime, self.user_key, "user")
        # With an org (the identity's org claim), the user is the user *of that org*.
        return self.identity(runtime).user_namespace(self.assistant_id)

    def identity(self, runtime: Any) -> RunIdentity:
        """The run's identity, by the one rule every integration uses
        (:func:`~worker.integrations.capture.resolve_identity`)."""
        return resolve_identity(
            runtime, current_config(), user_key=self.user_key, org_key=self.org_key
        )

    def _id(self, runtime: Any, key: str, what: str) -> str:
        found = self._find(runtime, what)
        if found is None:
            raise ConfigurationError(
                f"the run names no {what}: pass context={{{key!r}: ...}} (or configurable) so "
                "the agent reads its own memory (on an authenticating server: the identity, "
                "and its org claim, name them)"
            )
        return found

    def _find(self, runtime: Any, what: str) -> str | None:
        identity = self.identity(runtime)
        return identity.org_id if what == "organisation" else identity.user_id

    # --- the parts of create_deep_agent -------------------------------------------------------
    def routes(self) -> dict[str, StoreBackend]:
        """``CompositeBackend`` routes: one ``StoreBackend`` per mounted scope."""
        routes = {self.user_mount: StoreBackend(namespace=self.namespace(Scope.USER))}
        if self.agent_mount is not None:
            routes[self.agent_mount] = StoreBackend(namespace=self.namespace(Scope.AGENT))
        if self.org_mount is not None:
            routes[self.org_mount] = StoreBackend(namespace=self.namespace(Scope.ORG))
        return routes

    def backend(self, default: Any = None) -> CompositeBackend:
        """A ``CompositeBackend`` with the memory routes over ``default`` (a ``StateBackend``)."""
        return CompositeBackend(default=default or StateBackend(), routes=dict(self.routes()))

    def memory(self) -> list[str]:
        """The ``memory=`` paths."""
        return list(self.memory_files)

    def permissions(self) -> list[FilesystemPermission]:
        """deepagents ``permissions=`` rules, in the order they must be checked."""
        rules = [FilesystemPermission(operations=["write"], paths=[self.inbox_mount + "**"])]
        if self.approve:
            rules.append(
                FilesystemPermission(
                    operations=["write"], paths=list(self.approve), mode="interrupt"
                )
            )
        shared = [m + "**" for m in (self.agent_mount, self.org_mount) if m is not None]
        if shared:
            rules.append(FilesystemPermission(operations=["write"], paths=shared, mode="deny"))
        if not self.direct_edits:
            rules.append(
                FilesystemPermission(
                    operations=["write"], paths=[self.user_mount + "**"], mode="deny"
                )
            )
        return rules

    def agent_kwargs(self, default: Any = None) -> dict[str, Any]:
        """``backend``, ``memory`` and ``permissions`` for ``create_deep_agent(**...)``."""
        return {
            "backend": self.backend(default),
            "memory": self.memory(),
            "permissions": self.permissions(),
        }


def memory_backend(
    layout: StoreLayout | None = None,
    *,
    assistant_id: str | None = None,
    memory_files: Sequence[str] = ("/memories/preferences.md",),
    direct_edits: bool = False,
    approve: Sequence[str] = (),
    **mounts: Any,
) -> MemworkerMemory:
    """A :class:`MemworkerMemory` (see the module docstring); ``mounts`` are its other fields
    (``user_key``, ``org_key``, ``user_mount``, ``agent_mount``, ``org_mount``)."""
    return MemworkerMemory(
        layout=layout or StoreLayout(),
        assistant_id=assistant_id,
        memory_files=tuple(memory_files),
        direct_edits=direct_edits,
        approve=tuple(approve),
        **mounts,
    )
