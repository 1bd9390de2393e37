"""An in-memory ``CursorStore`` for the thread-scan tests (the SQL store has the real one)."""

from __future__ import annotations

from datetime import datetime


class InMemoryCursorStore:
    """Cursors in a dict, keyed by (source, key)."""

    def __init__(self) -> None:
        self.cursors: dict[tuple[str, str], tuple[str, datetime]] = {}

    def get_cursor(self, source: str, key: str) -> str | None:
        found = self.cursors.get((source, key))
        return found[0] if found else None

    def set_cursor(self, source: str, key: str, value: str, *, now: datetime) -> None:
        self.cursors[(source, key)] = (value, now)
