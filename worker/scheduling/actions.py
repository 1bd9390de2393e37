"""What each scheduled action does: a thin mapping from a schedule's action to a use case.

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
from datetime import datetime

from worker.errors import ScheduleError
from worker.runtime.container import Runtime
from worker.runtime.parts import scan_parts
from worker.scheduling.cron import Window
from worker.scheduling.runner import ActionReport, TickOutcome, run_scheduled_tick
from worker.scheduling.schedules import ScheduleSpec, bundled_schedules_dir, load_schedules
from worker.service.compact import RunContext, compact_files
from worker.service.scan import scan_sources
from worker.service.sweep import drain

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
        specs[schedule], tick, ledger=runtime.store, action=action_for(runtime, now=now), now=now
    )


def action_for(
    runtime: Runtime, *, now: datetime
) -> Callable[[ScheduleSpec, Window], ActionReport]:
    """The schedule's action over a window, bound to ``runtime``; ``now`` is the fire's clock."""

    def act(spec: ScheduleSpec, window: Window) -> ActionReport:
        if spec.action == "consolidate_pending":
            return ActionReport({"namespaces": drain(runtime.queue, scope=spec.scope)})
        if spec.action == "scan_sources":
            return _scan(runtime, spec, window, now)
        report = compact_files(
            runtime.store,
            runtime.settings,
            sinks=tuple(runtime.sinks),
            scope=spec.scope,
            now=window.end,
            context=RunContext(schedule=spec.name, window=window.as_tuple()),
        )
        return ActionReport(report.as_dict())

    return act


def _scan(runtime: Runtime, spec: ScheduleSpec, window: Window, now: datetime) -> ActionReport:
    with scan_parts(runtime.settings) as parts:
        scan = scan_sources(
            runtime.queue,
            runtime.store,
            parts,
            start=window.start,
            end=window.end,
            trace_id=f"schedule-{spec.name}",
            now=now,
            keep=lambda namespace: spec.scope is None or namespace.startswith(f"{spec.scope}:"),
        )
    if not scan.configured:
        log.info(
            "schedule %s: no source configured (MEMWORKER_LANGGRAPH_URL); nothing to scan",
            spec.name,
        )
    return ActionReport(
        {
            "threads": scan.threads,
            "candidates": len(scan.candidates),
            "inbox": scan.inbox,
            "agent_edits": scan.agent_edits,
            "set_aside": len(scan.set_aside),  # each logged with its reason by the bulkhead
        }
    )
