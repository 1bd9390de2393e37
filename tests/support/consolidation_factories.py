"""Small builders for consolidation tests: candidates, entries and states at fixed times."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from worker.models import Candidate, Entry, NamespaceState, make_candidate

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
NS = "user:u1"


def at(minutes: float) -> datetime:
    """``T0`` plus some minutes: every test time is explicit."""
    return T0 + timedelta(minutes=minutes)


def cand(
    text: str,
    *,
    kind: str = "fact",
    key: str | None = None,
    topic: str | None = None,
    minute: float = 0,
    user: str = "u1",
    ident: str | None = None,
) -> Candidate:
    """A candidate of ``user`` with a deterministic id (from ``ident`` or its text and time)."""
    return make_candidate(
        user_id=user, trace_id="trace-" + user, text=text, kind=kind, key=key, topic=topic,
        idempotency_key=ident or f"{text}@{minute}", now=at(minute),
    )  # fmt: skip


def entry(
    ident: str,
    text: str,
    *,
    path: str = "/memories/facts.md",
    key: str | None = None,
    minute: float = -60,
    confirmations: int = 1,
) -> Entry:
    return Entry(
        id=ident, path=path, text=text, key=key, valid_from=at(minute), created_at=at(minute),
        last_confirmed_at=at(minute), confirmations=confirmations,
    )  # fmt: skip


def state(
    entries: Iterable[Entry] = (), *, namespace: str = NS, read_only: Iterable[str] = ()
) -> NamespaceState:
    return NamespaceState(
        namespace=namespace, version=1, applied_position=None, entries=tuple(entries),
        read_only_paths=frozenset(read_only),
    )  # fmt: skip
