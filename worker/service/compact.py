"""Re-render every file within its byte budget (e.g. after the budget was lowered).

A file over its budget keeps the entries most worth loading and ends with one line counting
the rest (:func:`~worker.consolidation.render.select`); the entries left out stay active.

Each namespace is read in one snapshot and committed through the same database fence as a
merge, so a compaction racing a merge of the same namespace loses cleanly (counted ``stale``)
and the next compaction looks again. Each namespace is its own bulkhead: one that fails for any
other reason is set aside (named, with the reason, in the report) and the others are compacted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from worker.consolidation.apply import compact
from worker.errors import StaleVersion
from worker.service.bulkhead import Bulkhead, SetAside
from worker.slices import ConsolidationSettings
from worker.store.memory import MemoryStore, RunRecord
from worker.values import AppliedPlan


@dataclass(frozen=True)
class CompactionReport:
    namespaces: int  #: namespaces that got a new version
    evicted: int  #: active entries the new file versions leave out, over all of them
    stale: int  #: namespaces a concurrent merge changed first (left for the next compaction)
    set_aside: tuple[SetAside, ...] = field(default=())  #: namespaces that failed, and why

    def as_dict(self) -> dict[str, int]:
        return {
            "namespaces": self.namespaces,
            "evicted": self.evicted,
            "stale": self.stale,
            "set_aside": len(self.set_aside),
        }


@dataclass(frozen=True)
class RunContext:
    """Where a compaction's run rows say it came from (a schedule's fire, or none)."""

    schedule: str | None = None
    window: tuple[datetime, datetime] | None = None


def compact_files(
    store: MemoryStore,
    settings: ConsolidationSettings,
    *,
    sinks: Sequence[str],
    scope: str | None,
    now: datetime,
    context: RunContext = RunContext(),  # frozen: sharing the default is safe
) -> CompactionReport:
    """Compact every namespace of ``scope`` (all when None) whose files exceed their budget."""
    bulkhead = Bulkhead("compaction")
    totals = [0, 0, 0]  # compacted, evicted, stale
    for namespace in store.namespaces(scope=scope):
        done = bulkhead.run(
            namespace,
            lambda n=namespace: _compact_one(  # type: ignore[misc]
                store, settings, n, sinks=sinks, now=now, context=context
            ),
        )
        for i, n in enumerate(done or (0, 0, 0)):
            totals[i] += n
    compacted, evicted, stale = totals
    return CompactionReport(compacted, evicted, stale, tuple(bulkhead.set_aside))


def _compact_one(
    store: MemoryStore,
    settings: ConsolidationSettings,
    namespace: str,
    *,
    sinks: Sequence[str],
    now: datetime,
    context: RunContext,
) -> tuple[int, int, int]:
    """Compact one namespace: (compacted, evicted, stale), each 0 or its count."""
    snapshot = store.snapshot(namespace, ())
    state = snapshot.state
    applied = compact(
        state,
        now=now,
        current_files=snapshot.current_files,
        file_budget_bytes=settings.file_budget_bytes,
        sensitive_paths=settings.sensitive_paths,
    )
    if not applied.files:
        return 0, 0, 0
    try:
        store.commit_batch(
            namespace=namespace,
            expected_version=state.version,
            applied_position=state.applied_position,
            applied=applied,
            run=_run(namespace, applied, now, context),
            sinks=sinks,
            now=now,
        )
    except StaleVersion:
        return 0, 0, 1  # a merge committed meanwhile; the next compaction looks again
    return 1, applied.counts.get("evicted", 0), 0


def _run(namespace: str, applied: AppliedPlan, now: datetime, context: RunContext) -> RunRecord:
    return RunRecord(
        trigger="schedule" if context.schedule else "cli",
        namespace=namespace,
        schedule=context.schedule,
        tick=context.window[1] if context.window else None,
        window=context.window,
        started_at=now,
        finished_at=now,
        outcome="ok",
        error=None,
        candidates=0,
        counts=dict(applied.counts),
    )
