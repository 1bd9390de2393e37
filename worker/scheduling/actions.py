"""What each scheduled action does, wired to a worker's :class:`Runtime`.

* ``consolidate_pending`` — drain: every namespace (of the schedule's scope) with pending
  candidates becomes due now, whatever its debounce, and the next sweep merges it.
* ``scan_sources`` — pull conversations updated in the window from the LangGraph server as
  ``turn`` candidates (deterministic ids, per-thread cursors), enqueue them, mark them due.
* ``compact`` — evict entries from every file over its byte budget (e.g. after the budget was
  lowered), through the same database fence as a merge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from worker.consolidation.apply import compact
from worker.consolidation.types import AppliedPlan
from worker.errors import ScheduleError, StaleVersion
from worker.runtime.container import Runtime
from worker.scheduling.cron import Window
from worker.scheduling.runner import ActionReport, TickOutcome, run_scheduled_tick
from worker.scheduling.schedules import ScheduleSpec, bundled_schedules_dir, load_schedules
from worker.store.memory import RunRecord

log = logging.getLogger(__name__)


def run_schedule_tick(
    runtime: Runtime, schedule: str, tick: datetime, *, now: datetime
) -> TickOutcome:
    """Run the fire of ``schedule`` at ``tick`` (exactly once per tick; see the runner)."""
    specs = {
        s.name: s for s in load_schedules(runtime.settings.schedules_dir or bundled_schedules_dir())
    }
    if schedule not in specs:
        raise ScheduleError(f"no schedule named {schedule!r}; `memworker schedules` lists them")
    return run_scheduled_tick(
        specs[schedule], tick, ledger=runtime.store, action=action_for(runtime), now=now
    )


def action_for(runtime: Runtime) -> Callable[[ScheduleSpec, Window], ActionReport]:
    def act(spec: ScheduleSpec, window: Window) -> ActionReport:
        if spec.action == "consolidate_pending":
            return consolidate_pending(runtime, spec)
        if spec.action == "scan_sources":
            return scan_sources(runtime, spec, window)
        return compact_files(runtime, spec, window)

    return act


def _in_scope(spec: ScheduleSpec, namespace: str) -> bool:
    return spec.scope is None or namespace.startswith(f"{spec.scope}:")


def consolidate_pending(runtime: Runtime, spec: ScheduleSpec) -> ActionReport:
    marked = 0
    for namespace in runtime.queue.namespaces():
        if _in_scope(spec, namespace) and runtime.queue.mark_due(namespace):
            marked += 1
    return ActionReport({"namespaces": marked})


def scan_sources(runtime: Runtime, spec: ScheduleSpec, window: Window) -> ActionReport:
    settings = runtime.settings
    if not settings.langgraph_url:
        log.info(
            "schedule %s: no source configured (MEMWORKER_LANGGRAPH_URL); nothing to scan",
            spec.name,
        )
        return ActionReport({"threads": 0, "candidates": 0})
    from langgraph_sdk import get_sync_client

    from worker.sources.langgraph_threads import collect_threads

    client = get_sync_client(url=settings.langgraph_url, api_key=settings.langgraph_api_key)
    scan = collect_threads(
        client,
        window.start,
        window.end,
        cursors=runtime.store,
        trace_id=f"schedule-{spec.name}",
        max_text_bytes=settings.max_text_bytes,
    )
    candidates = [c for c in scan.candidates if _in_scope(spec, c.namespace)]
    runtime.queue.enqueue_many(candidates)
    # Cursors move only after the candidates are durably queued: a crash in between re-reads
    # the same messages, whose deterministic ids the ledger then dedupes.
    scan.advance(runtime.store)
    for namespace in {c.namespace for c in candidates}:
        runtime.queue.mark_due(namespace)
    return ActionReport({"threads": len(scan.threads_seen), "candidates": len(candidates)})


def compact_files(runtime: Runtime, spec: ScheduleSpec, window: Window) -> ActionReport:
    settings = runtime.settings
    store = runtime.store
    compacted = evicted = stale = 0
    for namespace in store.namespaces(scope=spec.scope):
        state = store.load_state(namespace)
        applied = compact(
            state,
            now=window.end,
            current_files=store.current_files(namespace),
            file_budget_bytes=settings.file_budget_bytes,
            sensitive_paths=settings.sensitive_paths,
        )
        if not applied.files:
            continue
        try:
            store.commit_batch(
                namespace=namespace,
                expected_version=state.version,
                applied_position=state.applied_position,
                applied=applied,
                run=_compaction_run(spec, namespace, window, applied),
                sinks=tuple(runtime.sinks),
                now=window.end,
            )
        except StaleVersion:
            stale += 1  # a merge committed meanwhile; the next compaction looks again
            continue
        compacted += 1
        evicted += applied.counts.get("evicted", 0)
    return ActionReport({"namespaces": compacted, "evicted": evicted, "stale": stale})


def _compaction_run(
    spec: ScheduleSpec, namespace: str, window: Window, applied: AppliedPlan
) -> RunRecord:
    started = datetime.now(UTC)
    return RunRecord(
        trigger="schedule",
        namespace=namespace,
        schedule=spec.name,
        tick=window.end,
        window=window.as_tuple(),
        started_at=started,
        finished_at=started,
        outcome="ok",
        error=None,
        candidates=0,
        counts=dict(applied.counts),
    )
