"""The scheduled tick: one fire of a schedule, from its name and tick to the action's report.

The hub finds the schedule, claims the (schedule, tick) pair in the ledger and runs the
schedule's action over its window (see :mod:`worker.scheduling.runner`); beat and Celery only
hand it the name and the tick. Each action maps to a use case:

* ``consolidate_pending`` — drain: every namespace (of the schedule's scope) with pending
  candidates becomes due now, whatever its debounce, and the next sweep merges it.
* ``scan_sources`` — pull conversations updated in the window from the LangGraph server as
  ``turn`` candidates (deterministic ids, per-thread cursors), enqueue them, mark them due.
* ``compact`` — evict entries from every file over its byte budget (e.g. after the budget was
  lowered), through the same database fence as a merge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from worker.errors import ScheduleError
from worker.queue.keys import scope_of
from worker.queue.redis_queue import RedisQueue
from worker.scheduling.cron import Window, parse_tick
from worker.scheduling.runner import ActionReport, TickOutcome, run_scheduled_tick
from worker.scheduling.schedules import ScheduleSpec, bundled_schedules_dir, load_schedules
from worker.service.compact import RunContext, compact_files
from worker.service.scan import ScanParts, scan_sources
from worker.service.sweep import drain
from worker.slices import ConsolidationSettings, LaneSettings
from worker.store.memory import MemoryStore

log = logging.getLogger(__name__)


class TickSettings(Protocol):
    """The slices of the settings a tick reads: the lanes' (where the schedules are) and the
    consolidation's (what a compaction is held to)."""

    @property
    def for_lanes(self) -> LaneSettings: ...
    @property
    def for_consolidation(self) -> ConsolidationSettings: ...


class TickParts(Protocol):
    """What a tick may need; each part is reached only by the action that uses it (a drain
    never builds the sinks)."""

    @property
    def settings(self) -> TickSettings: ...

    @property
    def queue(self) -> RedisQueue: ...

    @property
    def store(self) -> MemoryStore: ...

    @property
    def sinks(self) -> Mapping[str, object]: ...


#: Opens the sources a scan reads, closed when the scan is done.
OpenScanParts = Callable[[], AbstractContextManager[ScanParts]]


def run_schedule_tick(
    parts: TickParts,
    schedule: str,
    tick: str,
    *,
    open_scan: OpenScanParts,
    now: datetime,
) -> TickOutcome:
    """Run the fire of ``schedule`` at ``tick`` (its wire form, ISO UTC, as beat sent it),
    exactly once per tick (see the runner)."""
    fired = parse_tick(tick)
    lanes = parts.settings.for_lanes
    specs = {s.name: s for s in load_schedules(lanes.schedules_dir or bundled_schedules_dir())}
    if schedule not in specs:
        raise ScheduleError(f"no schedule named {schedule!r}; `memworker schedules` lists them")
    return run_scheduled_tick(
        specs[schedule],
        fired,
        ledger=parts.store,
        action=action_for(parts, open_scan=open_scan, now=now),
        now=now,
    )


def action_for(
    parts: TickParts, *, open_scan: OpenScanParts, now: datetime
) -> Callable[[ScheduleSpec, Window], ActionReport]:
    """The schedule's action over a window, bound to ``parts``; ``now`` is the fire's clock."""

    def act(spec: ScheduleSpec, window: Window) -> ActionReport:
        if spec.action == "consolidate_pending":
            return ActionReport({"namespaces": drain(parts.queue, scope=spec.scope)})
        if spec.action == "scan_sources":
            return _scan(parts, open_scan, spec, window, now)
        report = compact_files(
            parts.store,
            parts.settings.for_consolidation,
            sinks=tuple(parts.sinks),
            scope=spec.scope,
            now=window.end,
            context=RunContext(schedule=spec.name, window=window.as_tuple()),
        )
        return ActionReport(report.as_dict())

    return act


def _scan(
    parts: TickParts, open_scan: OpenScanParts, spec: ScheduleSpec, window: Window, now: datetime
) -> ActionReport:
    with open_scan() as sources:
        scan = scan_sources(
            parts.queue,
            parts.store,
            sources,
            start=window.start,
            end=window.end,
            trace_id=f"schedule-{spec.name}",
            now=now,
            keep=lambda namespace: spec.scope is None or scope_of(namespace) == spec.scope,
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
