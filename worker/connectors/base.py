"""What a sink and a source are: the protocols the service is handed.

What a sink is: a place committed memory-file versions are published to.

Sinks are views of the SQL store, never a source of truth. The outbox calls them only with
committed versions and retries until they succeed, so a sink must be idempotent (overwrite by
key) and must signal every failure with :class:`~worker.errors.SinkError`.

>>> from datetime import UTC, datetime
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> item = PublishedFile("user:u1", "/memories/preferences.md", "- tea\\n", 3, t, t)
>>> item.deleted
False

What a source is: a place the scan reads conversations and agents' writes from.

The scan (:mod:`worker.service.scan`) sees sources only through these protocols; the runtime
builds the concrete ones (LangGraph threads, the LangGraph store's inbox) from settings. Both
are read at least once: a source returns what it found *and* the cursor moves, and the caller
records the moves only once the candidates are safely queued.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from worker.errors import ExternalEdit


@dataclass(frozen=True)
class PublishedFile:
    """One committed version of one memory file, as the outbox hands it to a sink."""

    #: Namespace key, e.g. ``user:u1`` or ``agent:support-bot`` (see ``worker.models.Namespace``).
    namespace: str
    #: Normalised memory path, e.g. ``/memories/preferences.md``.
    path: str
    #: The rendered Markdown.
    content: str
    #: The file's version number in the SQL store.
    version: int
    created_at: datetime
    modified_at: datetime
    #: True when this version deletes the file; a sink removes it.
    deleted: bool = False


@runtime_checkable
class Sink(Protocol):
    """A publication target. Both methods raise ``SinkError`` on failure; both are idempotent."""

    #: The name the outbox files deliveries under (``files``, ``langgraph``, …).
    name: str

    def deliver(self, item: PublishedFile) -> None:
        """Make ``item`` the current content of its path (remove it if ``item.deleted``)."""
        ...

    def erase(self, namespace: str, paths: Sequence[str]) -> None:
        """Remove these paths of one namespace; paths already absent are not an error."""
        ...


@runtime_checkable
class CompareAndSetSink(Sink, Protocol):
    """A sink that refuses to overwrite what it did not publish (the LangGraph store sink).

    ``deliver`` raises :class:`~worker.errors.ExternalEdit` when the target holds content the
    sink did not write; once that content is absorbed, ``overwrite`` publishes over exactly it.
    """

    def overwrite(self, item: PublishedFile, *, expected_sha256: str) -> None:
        """Publish ``item`` over content whose SHA-256 is ``expected_sha256``; ``ExternalEdit``
        when the target holds anything else (it changed again)."""
        ...


@runtime_checkable
class ErasesAgentWrites(Protocol):
    """A sink that also holds what agents wrote for a namespace beyond its published files
    (the LangGraph store's inbox items). An erase calls it *before* SQL forgets the namespaces,
    so a sink that fails leaves the user known and the erase can simply run again."""

    def erase_agent_writes(self, namespaces: Sequence[str]) -> int:
        """Delete what agents wrote for these namespaces; returns how many items went.
        ``SinkError`` when the sink cannot list or delete them."""
        ...


@runtime_checkable
class TidiesAfterErase(Protocol):
    """A sink that keeps traces of an erased namespace besides its files (the files sink's
    folders, whose names carry the user id). An erase calls it once the files are removed."""

    def tidy_after_erase(self, files: Mapping[str, Sequence[str]]) -> None:
        """Remove what is left of these namespaces' erased ``files`` (namespace -> paths)."""
        ...


@runtime_checkable
class ReadsBack(Sink, Protocol):
    """A sink whose items can be read back and removed by their raw address in the target
    (the LangGraph store sink; a layout migration moves items through it)."""

    def namespace_for(self, namespace: str) -> tuple[str, ...]:
        """The target's namespace of a memory namespace's files."""
        ...

    def key_for(self, namespace: str, path: str) -> str:
        """The target's key of one memory path."""
        ...

    def has_item(self, store_namespace: Sequence[str], key: str) -> bool:
        """Whether an item is stored at this raw namespace and key."""
        ...

    def remove_item(self, store_namespace: Sequence[str], key: str) -> bool:
        """Delete one item by its raw namespace and key; False when it was not there."""
        ...


@runtime_checkable
class ReadsEdits(Protocol):
    """A compare-and-set sink that can tell, by reading one published file back, whether an
    agent changed it since memworker published it (the LangGraph store sink). A consolidation
    of the namespace asks it first, so an agent's edit is merged without waiting for a scan."""

    def external_edit(self, item: PublishedFile, *, timeout: float) -> ExternalEdit | None:
        """What the target holds at ``item``'s path when it is not memworker's content (an
        :class:`~worker.errors.ExternalEdit`, not raised), else ``None``; one read, abandoned
        after ``timeout`` seconds with ``SinkError``."""
        ...


class Cursors(Protocol):
    """Where sources keep their cursors between scans (the SQL store implements it)."""

    def get_cursor(self, source: str, key: str) -> str | None: ...

    def set_cursor(
        self, source: str, key: str, value: str, *, now: datetime, namespace: str | None = None
    ) -> None: ...


class ThreadFinds(Protocol):
    """What one thread scan found: candidates, and the cursor moves to record afterwards."""

    @property
    def candidates(self) -> Sequence[Any]: ...  # Candidate; Any keeps the protocol covariant

    @property
    def threads_seen(self) -> Sequence[str]: ...

    @property
    def set_aside(self) -> Mapping[str, str]:
        """Thread id -> why nothing of it was filed (no owner established, or its metadata
        names someone else than its owner)."""
        ...

    def only(self, keep: Callable[[str], bool]) -> ThreadFinds:
        """The finds of the namespaces ``keep`` accepts (a thread left out keeps its cursor)."""
        ...

    def advance(self, cursors: Cursors, *, now: datetime | None = None) -> None:
        """Record the cursor moves; call after the candidates are queued."""
        ...


class ThreadSource(Protocol):
    """Conversations updated in a window, as ``turn`` candidates."""

    def collect(
        self,
        start: datetime,
        end: datetime,
        *,
        cursors: Cursors,
        assistant_id: str | None,
        trace_id: str,
        now: datetime,
    ) -> ThreadFinds: ...


class InboxFinds(Protocol):
    """What one inbox scan found (see :mod:`worker.connectors.inbox` for the order of the steps)."""

    @property
    def candidates(self) -> Sequence[Any]: ...

    @property
    def cursor_updates(self) -> Mapping[str, dict[str, dict[str, Any]]]: ...

    @property
    def removable(self) -> Sequence[tuple[tuple[str, ...], str, str]]: ...

    @property
    def set_aside(self) -> Sequence[tuple[str, str, str]]:
        """(memory namespace, item key, reason) of the items over the source's bounds."""
        ...


class InboxSource(Protocol):
    """What agents appended to their inbox, as ``fact`` candidates; removed once merged."""

    #: The cursor-store ``source`` the inbox's per-namespace cursors are kept under.
    cursor_source: str

    def collect(
        self,
        *,
        cursors: Cursors,
        merged: Callable[[str, Sequence[str]], bool],
        now: datetime,
        trace_id: str,
    ) -> InboxFinds: ...

    def owner_of(self, store_namespace: Sequence[str]) -> str | None:
        """The user namespace key a store namespace belongs to, or ``None``."""
        ...

    def remove_if_unchanged(self, store_namespace: Sequence[str], key: str, sha256: str) -> bool:
        """Inbox clean-up: delete an item only while it still holds exactly the merged content
        (an agent that added to it keeps it); True when it was deleted."""
        ...
