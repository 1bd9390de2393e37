"""Move org memory out of the one store namespace every org used to share.

Before store namespaces were per scope, one template served every scope, and every org namespace
mapped to the same tuple (``('_org', '_shared', 'memories')`` by default): the last org to
publish a path won it, and every org's agents read it. The shared item cannot tell whose it is,
so nothing is copied from it: each org's files are published again **from SQL** (the source of
truth) to their own tuple, and then the old shared items are deleted.

Safe to run more than once, and while workers run (publishing is compare-and-set, and an item
already at its new place is published over only if it is still memworker's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from worker.errors import ExternalEdit
from worker.models import Namespace
from worker.sinks.base import PublishedFile, ReadsBack
from worker.store.memory import MemoryStore
from worker.store_layout import LEGACY_TEMPLATE, fill, store_key


@dataclass(frozen=True)
class Move:
    """One org file: where the old layout kept it and where it goes now."""

    namespace: str
    path: str
    old_namespace: tuple[str, ...]
    old_key: str
    new_namespace: tuple[str, ...]
    new_key: str
    #: Whether an item was at the old place (always reported by a dry run as it is now).
    old_present: bool
    #: ``moved``, ``would move``, or ``kept: <why>`` when the new place holds an agent's edit.
    outcome: str


def migrate_org_items(
    store: MemoryStore,
    sink: ReadsBack,
    *,
    old_template: Sequence[str] = LEGACY_TEMPLATE,
    old_route: str = "/memories/",
    dry_run: bool = False,
) -> list[Move]:
    """Publish every org file to its own tuple from SQL, then delete the old shared items;
    ``dry_run`` only reports what it would do."""
    moves: list[Move] = []
    stale: set[tuple[tuple[str, ...], str]] = set()
    for key in store.namespaces(scope="org"):
        ns = Namespace.parse(key)
        old_ns = fill(old_template, ns)
        for info in store.list_files(key):
            old_key = store_key(info.path, old_route)
            new_ns, new_key = sink.namespace_for(key), sink.key_for(key, info.path)
            present = sink.has_item(old_ns, old_key)
            outcome = "would move" if dry_run else "moved"
            if not dry_run:
                history = store.file_history(key, info.path)
                last = history[-1]
                item = PublishedFile(
                    key, info.path, last.content, last.version, history[0].created_at,
                    last.created_at,
                )  # fmt: skip
                try:
                    sink.deliver(item)
                except ExternalEdit:
                    outcome = "kept: the new place holds content memworker did not publish"
            if (old_ns, old_key) != (new_ns, new_key):
                stale.add((old_ns, old_key))
            moves.append(Move(key, info.path, old_ns, old_key, new_ns, new_key, present, outcome))
    if not dry_run:
        for old_ns, old_key in sorted(stale):
            sink.remove_item(old_ns, old_key)
    return moves
