"""What a source is: a place the scan reads conversations and agents' writes from.

The scan (:mod:`worker.service.scan`) sees sources only through these protocols; the runtime
builds the concrete ones (LangGraph threads, the LangGraph store's inbox) from settings. Both
are read at least once: a source returns what it found *and* the cursor moves, and the caller
records the moves only once the candidates are safely queued.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol


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
    """What one inbox scan found (see :mod:`worker.sources.inbox` for the order of the steps)."""

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
