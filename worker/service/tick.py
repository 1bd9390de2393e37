"""The scheduled tick: one fire of a schedule, from its name and tick to the action's report.

The hub finds the schedule, claims the (schedule, tick) pair in the ledger and runs the
schedule's action over its window (see :mod:`worker.service.schedules`); beat and Celery only
hand it the name and the tick. Each action maps to a use case:

* ``consolidate_pending`` — drain: every namespace (of the schedule's scope) with pending
  candidates becomes due now, whatever its debounce, and the next sweep merges it.
* ``scan_sources`` — pull conversations updated in the window from the LangGraph server as
  ``turn`` candidates (deterministic ids, per-thread cursors), enqueue them, mark them due.
* ``compact`` — evict entries from every file over its byte budget (e.g. after the budget was
  lowered), through the same database fence as a merge.

The ledger (a SQL table in production) makes the run safe to repeat: a (schedule, tick) pair
starts at most once at a time and succeeds at most once, so a duplicate beat or a redelivered
task is harmless; the watermark only moves forward on success, so the window of the next run
starts where the last successful one ended and missed ticks are caught up, not skipped.

>>> from datetime import datetime, UTC
>>> from worker.service.schedules import ScheduleSpec
>>> class Ledger:  # the smallest ledger: remembers everything in dicts
...     def __init__(self): self.started, self.marks = set(), {}
...     def try_start_tick(self, schedule, tick, *, now):
...         new = (schedule, tick) not in self.started
...         self.started.add((schedule, tick))
...         return new
...     def watermark(self, schedule): return self.marks.get(schedule)
...     def finish_tick(self, schedule, tick, *, ok, window, error, now):
...         if ok: self.marks[schedule] = max(tick, self.marks.get(schedule, tick))
>>> spec = ScheduleSpec(name="every-6h", cron="0 */6 * * *", action="consolidate_pending")
>>> tick = datetime(2024, 1, 1, 6, tzinfo=UTC)
>>> act = lambda spec, window: ActionReport({"namespaces": 3})
>>> run_scheduled_tick(spec, tick, ledger=Ledger(), action=act, now=tick).window.duration
datetime.timedelta(seconds=21600)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from worker.errors import ScheduleError, describe_error
from worker.queue.redis_queue import RedisQueue
from worker.queue.scripts import scope_of
from worker.service.operator import RunContext, compact_files
from worker.service.scan import ScanParts, scan_sources
from worker.service.schedules import (
    ScheduleSpec,
    Window,
    bundled_schedules_dir,
    load_schedules,
    lookback_window,
    parse_tick,
)
from worker.service.sweep import drain
from worker.store.memory import MemoryStore
from worker.types import ConsolidationSettings, LaneSettings

#: How a tick ended without raising.
#: ``ran``: the action covered the window; ``duplicate``: this tick is already running or done
#: (a second beat, a redelivery); ``stale``: a later tick already covered this window;
#: ``disabled``: the schedule is switched off, nothing was recorded.
TickStatus = Literal["ran", "duplicate", "stale", "disabled"]


@dataclass(frozen=True)
class ActionReport:
    """What a scheduled action did, as named counts (``{"threads": 4, "candidates": 17}``)."""

    counts: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TickOutcome:
    """The result of :func:`run_scheduled_tick` for logs and the task's return value."""

    schedule: str
    tick: datetime
    status: TickStatus
    window: Window | None = None
    report: ActionReport | None = None


class ScheduleLedger(Protocol):
    """Durable record of scheduled ticks and of each schedule's watermark.

    Contract for implementations:

    * ``try_start_tick`` is atomic and unique per (schedule, tick). It returns True when the
      tick was never started or its last attempt failed (a retry), and marks it running; False
      when an attempt is running or already succeeded.
    * ``watermark`` is the end of the schedule's latest successful window, or None.
    * ``finish_tick`` records the attempt's outcome. With ``ok=True`` the watermark becomes
      ``max(watermark, tick)`` — it never moves backwards; with ``ok=False`` it is unchanged.
    """

    def try_start_tick(self, schedule: str, tick: datetime, *, now: datetime) -> bool: ...

    def watermark(self, schedule: str) -> datetime | None: ...

    def finish_tick(
        self,
        schedule: str,
        tick: datetime,
        *,
        ok: bool,
        window: tuple[datetime, datetime] | None,
        error: str | None,
        now: datetime,
    ) -> None: ...


#: The work of a schedule: given the spec and the window to cover, do it and report.
ScheduledAction = Callable[[ScheduleSpec, Window], ActionReport]


def run_scheduled_tick(
    spec: ScheduleSpec,
    tick: datetime,
    *,
    ledger: ScheduleLedger,
    action: ScheduledAction,
    now: datetime,
    clock: Callable[[], datetime] | None = None,
) -> TickOutcome:
    """Run ``spec``'s ``action`` for the fire at ``tick``, at most once per (schedule, tick).

    ``now`` is the start time; ``clock`` (default: always ``now``) gives the finish time.
    An exception from the action is recorded as a failed attempt and re-raised, so the task
    queue retries it; the watermark stays put, so the next tick covers this window too.
    """
    if tick.tzinfo is None or tick.utcoffset() is None:
        raise ScheduleError(f"tick {tick.isoformat()} of schedule {spec.name!r} is naive")
    tick = tick.astimezone(UTC)
    finished_at = clock or (lambda: now)
    if not spec.enabled:
        return TickOutcome(spec.name, tick, "disabled")
    if not ledger.try_start_tick(spec.name, tick, now=now):
        return TickOutcome(spec.name, tick, "duplicate")

    window: Window | None = None
    try:
        window = lookback_window(
            spec.cron, tick, tz=spec.timezone, watermark=ledger.watermark(spec.name)
        )
        if window.is_empty:
            # A later tick succeeded first (this fire was delayed): its window already covered
            # this one. Record success; the watermark keeps its later value.
            ledger.finish_tick(spec.name, tick, ok=True, window=None, error=None, now=finished_at())
            return TickOutcome(spec.name, tick, "stale", window)
        report = action(spec, window)
    except BaseException as exc:
        # BaseException too: a worker shutting down mid-action must not leave the tick
        # "running" forever, which would block its retry.
        ledger.finish_tick(
            spec.name,
            tick,
            ok=False,
            window=window.as_tuple() if window is not None else None,
            error=describe_error(exc),
            now=finished_at(),
        )
        raise
    ledger.finish_tick(
        spec.name, tick, ok=True, window=window.as_tuple(), error=None, now=finished_at()
    )
    return TickOutcome(spec.name, tick, "ran", window, report)


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
