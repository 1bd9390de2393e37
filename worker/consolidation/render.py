"""Render a memory file from its entries: stable Markdown, byte-for-byte deterministic.

One title from the path, then one bullet per active entry, oldest first (creation time, then
validity start, then id, so entries created in the same run keep a fixed order). Multi-line
entry texts continue indented under their bullet, so a stored text can never start a new bullet
or heading of its own.

>>> from datetime import UTC, datetime
>>> from worker.values import Entry
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> e = Entry(id="a", path="/memories/work/side_projects.md", text="Builds a\\nkeyboard",
...           valid_from=t, created_at=t, last_confirmed_at=t)
>>> print(render_file("/memories/work/side_projects.md", [e]), end="")
# Work / Side projects
<BLANKLINE>
- Builds a
  keyboard
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from worker.constants import MEMORY_ROUTE
from worker.values import Entry

#: Indent of continuation lines: two spaces keep them inside the Markdown list item.
CONTINUATION: Final = "\n  "


def title_for(path: str) -> str:
    """A human title from a memory path.

    >>> title_for("/memories/preferences.md")
    'Preferences'
    """
    relative = path.removeprefix(MEMORY_ROUTE).removesuffix(".md")
    parts = [p.replace("_", " ").replace("-", " ").strip() for p in relative.split("/")]
    return " / ".join(p[:1].upper() + p[1:] for p in parts if p)


def entry_order(entry: Entry) -> tuple[datetime, datetime, str]:
    """Sort key: creation time, then validity start, then id (all timestamps are tz-aware)."""
    return (entry.created_at, entry.valid_from, entry.id)


def render_file(path: str, entries: Iterable[Entry]) -> str:
    """The Markdown of ``path``: its title and its active entries (others are ignored)."""
    lines = [f"# {title_for(path)}", ""]
    chosen = sorted((e for e in entries if e.active and e.path == path), key=entry_order)
    for entry in chosen:
        body = CONTINUATION.join(line.strip() for line in entry.text.strip().splitlines())
        lines.append(f"- {body}")
    return "\n".join(lines).rstrip("\n") + "\n"
