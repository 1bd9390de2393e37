"""Search a namespace's committed entries in SQL: the backend of the ``search_memory`` tool.

Matching uses the one normal form every comparison in memworker uses (Unicode-normalised,
case-folded tokens; see :mod:`worker.consolidation.text`): an entry matches when it shares a
token with the query (a whole normalised phrase ranks first), ranked by shared tokens, then
confirmations, then recency. Only active entries are searched; superseded and forgotten ones
stay in history, out of the agent's reach.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.consolidation.text import contains_normalised_phrase, normalise, tokens
from worker.store.memory import MemoryStore
from worker.values import MemoryHit


class SqlMemorySearch:
    """:class:`~worker.integrations.search_tools.MemorySearch` over the SQL memory store."""

    supports_search = True

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def search(self, namespace: str, query: str, *, limit: int) -> Sequence[MemoryHit]:
        wanted = set(tokens(query))
        if not wanted:
            return []
        phrase = normalise(query)
        ranked: list[tuple[tuple[int, int, int, str], MemoryHit]] = []
        for entry in self.store.load_state(namespace).entries:
            shared = len(wanted & set(tokens(entry.text)))
            if not shared:
                continue
            whole = int(contains_normalised_phrase(normalise(entry.text), phrase))
            rank = (whole, shared, entry.confirmations, entry.valid_from.isoformat())
            ranked.append((rank, MemoryHit(entry.path, entry.text)))
        ranked.sort(key=lambda pair: pair[0], reverse=True)
        return [hit for _, hit in ranked[:limit]]

    def read(self, namespace: str, path: str) -> str | None:
        return self.store.current_files(namespace).get(path)
