"""Wire a deep agent to memworker's memory in one place: routes, namespaces, memory, permissions.

:func:`memory_backend` returns a :class:`MemworkerMemory` whose parts go straight into
``create_deep_agent``::

    from deepagents import create_deep_agent
    from worker.integrations.deepagents import memory_backend

    memory = memory_backend(assistant_id="support-bot", memory_files=["/memories/preferences.md"])
    agent = create_deep_agent(model=model, **memory.agent_kwargs())
    agent.invoke({"messages": [...]}, context={"user_id": "u1", "org_id": "acme"})

What it sets up, from the same :class:`~worker.store_layout.StoreLayout` the store
sink writes with (so reader and writer cannot disagree):

- **routes** of a ``CompositeBackend``: the user's memory at ``/memories/``, the assistant's
  shared memory at ``/shared/``, the organisation's at ``/policies/`` (each a ``StoreBackend``
  over the graph's store; any of the last two can be left out);
- **namespace factories** reading the ids by the one identity rule
  (:func:`~worker.integrations.run_context.resolve_identity`): on a server that
  authenticates, the identity is the user and its org claim the organisation, and a run whose
  ``context``/``configurable``/metadata names anyone else is refused
  (:class:`~worker.errors.IdentityMismatch`, nothing read); without authentication, the
  run's ``context``, then ``configurable``, then metadata — never the model;
- the ``memory=`` paths to load into the system prompt;
- deepagents' own ``permissions=`` rules (first match wins): the inbox (``/memories/inbox/``)
  is writable; files memworker owns under ``/memories/`` are read-only unless
  ``direct_edits=True`` (then memworker absorbs the agent's edits before it publishes again);
  agent-shared and org memory are always read-only; paths in ``approve`` pause for a human
  (``mode="interrupt"``) before the agent writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from deepagents import FilesystemPermission
from deepagents.backends import CompositeBackend, StateBackend, StoreBackend

from worker.errors import ConfigurationError
from worker.integrations.run_context import RunIdentity, current_config, resolve_identity
from worker.models import Namespace, Scope
from worker.store_layout import StoreLayout

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
        (:func:`~worker.integrations.run_context.resolve_identity`)."""
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
