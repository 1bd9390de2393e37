"""Celery beat glue: cron schedules that hand each task the tick it was fired for.

Celery beat does not tell a task *which* scheduled time it runs for, yet the lookback window
depends on it. :class:`CronTickSchedule` decides when a schedule is due from its cron
expression (in its own time zone), and :class:`MemworkerScheduler` adds ``tick=<ISO UTC>`` to
the keyword arguments of every fire of such an entry. The scheduler also writes a heartbeat
file on every loop, for health checks.

Configure a Celery app with::

    app.conf.beat_scheduler = "worker.runtime.beat:MemworkerScheduler"
    app.conf.beat_schedule = beat_schedule_for(load_schedules(folder), queue="mw.sweep")
    app.conf.memworker_beat_heartbeat = str(data_dir / HEARTBEAT_FILENAME)

>>> from datetime import datetime, UTC
>>> from worker.service.schedules import ScheduleSpec
>>> spec = ScheduleSpec(name="every-6h", cron="0 */6 * * *", action="consolidate_pending")
>>> entry = beat_schedule_for([spec], queue="mw.sweep")["every-6h"]
>>> entry["task"], entry["args"], entry["options"]
('memworker.scheduled_run', ('every-6h',), {'queue': 'mw.sweep'})
>>> entry["schedule"].due_tick(datetime(2024, 1, 1, 7, 30, tzinfo=UTC))
datetime.datetime(2024, 1, 1, 6, 0, tzinfo=datetime.timezone.utc)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from celery import Celery
from celery.beat import ScheduleEntry, Scheduler
from celery.schedules import BaseSchedule, schedstate

from worker.errors import MemworkerError
from worker.queue.deployment import BeatLock
from worker.runtime.processes import stop_within
from worker.service.schedules import (
    HEARTBEAT_FILENAME,
    HEARTBEAT_INTERVAL_SECONDS,
    ScheduleSpec,
    bundled_schedules_dir,
    format_tick,
    load_schedules,
    next_ticks,
    parse_tick,  # noqa: F401 - the wire form's reader, beside its writer
    previous_tick,
    validate_cron,
    write_heartbeat,
    zone,
)
from worker.settings import Settings
from worker.types import (
    DELIVER_LANE,
    DELIVER_TASK,
    SCHEDULED_RUN_TASK,
    SWEEP_LANE,
    SWEEP_TASK,
    LaneSettings,
    queue_name,
)

logger = logging.getLogger(__name__)

#: Keyword argument carrying the fired tick.
TICK_KWARG: Final = "tick"

#: Celery configuration key naming the heartbeat file (a path string).
HEARTBEAT_CONF_KEY: Final = "memworker_beat_heartbeat"
#: App config key holding the :class:`BeatLock` (set by the Celery app factory).
BEAT_LOCK_CONF_KEY: Final = "memworker_beat_lock"
#: App config key: True when a supervisor reports Redis outages for this beat (``memworker
#: run``), so the beat does not repeat them.
BEAT_REDIS_WATCHED_CONF_KEY: Final = "memworker_beat_redis_watched"
#: Where the ``beat`` command asks for a stop deadline: once beat starts to stop, the process
#: ends within this many seconds (:func:`~worker.runtime.processes.stop_within`).
BEAT_STOP_CONF_KEY: Final = "memworker_beat_stop_seconds"

#: How often beat asks the outbox for undelivered versions (new commits also trigger delivery
#: right away; this catches retries after a sink outage).
OUTBOX_INTERVAL_SECONDS: Final = 10.0


def configure_beat(app: Celery, settings: Settings) -> None:
    """Give ``app`` memworker's scheduler, its beat schedule (the sweep, the outbox pass and
    every enabled schedule of ``settings``) and its heartbeat file."""
    app.conf.update(
        beat_scheduler="worker.runtime.beat:MemworkerScheduler",
        beat_schedule=beat_schedule(settings.for_lanes),
    )
    app.conf[HEARTBEAT_CONF_KEY] = str(settings.data_dir / HEARTBEAT_FILENAME)


def beat_schedule(settings: LaneSettings) -> dict[str, dict[str, Any]]:
    """The sweep and the outbox pass at their intervals, and each enabled schedule's ticks."""
    specs = load_schedules(settings.schedules_dir or bundled_schedules_dir())
    sweep_q = queue_name(settings.key_prefix, SWEEP_LANE)
    deliver_q = queue_name(settings.key_prefix, DELIVER_LANE)
    schedule: dict[str, dict[str, Any]] = {
        SWEEP_TASK: {
            "task": SWEEP_TASK,
            "schedule": timedelta(seconds=settings.sweep_interval_seconds),
            "options": {"queue": sweep_q, "expires": settings.sweep_interval_seconds * 5},
        },
        DELIVER_TASK: {
            "task": DELIVER_TASK,
            "schedule": timedelta(seconds=OUTBOX_INTERVAL_SECONDS),
            "options": {"queue": deliver_q, "expires": OUTBOX_INTERVAL_SECONDS * 5},
        },
    }
    schedule.update(beat_schedule_for(specs, task_name=SCHEDULED_RUN_TASK, queue=sweep_q))
    return schedule


class CronTickSchedule(BaseSchedule):  # type: ignore[misc]  # celery ships no type hints
    """A Celery schedule from a cron expression read in ``tz``; due once per cron tick.

    Due when a tick has passed since the entry last ran. After downtime it is due once, for
    the latest tick: the run's window starts at the schedule's watermark, so nothing is lost.
    """

    def __init__(
        self,
        cron: str,
        tz: str = "UTC",
        nowfun: Callable[[], datetime] | None = None,
        app: Celery | None = None,
    ) -> None:
        super().__init__(nowfun=nowfun, app=app)
        self.cron = validate_cron(cron)
        zone(tz)  # fail at configuration time, not at the first fire
        self.timezone_name = tz

    def now_utc(self) -> datetime:
        return _as_utc(self.now())

    def due_tick(self, now: datetime) -> datetime:
        """The tick a fire at ``now`` stands for: the latest tick at or before ``now``."""
        return previous_tick(self.cron, self.timezone_name, _as_utc(now))

    def next_tick(self, now: datetime) -> datetime:
        return next_ticks(self.cron, self.timezone_name, _as_utc(now), 1)[0]

    def is_due(self, last_run_at: datetime) -> schedstate:
        now = self.now_utc()
        due = self.due_tick(now) > _as_utc(last_run_at)
        return schedstate(is_due=due, next=(self.next_tick(now) - now).total_seconds())

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return max(self.next_tick(_as_utc(last_run_at)) - self.now_utc(), timedelta(0))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CronTickSchedule):
            return (self.cron, self.timezone_name, self.nowfun) == (
                other.cron,
                other.timezone_name,
                other.nowfun,
            )
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.cron, self.timezone_name))

    def __reduce__(self) -> tuple[type[CronTickSchedule], tuple[str, str]]:
        # Pickled by PersistentScheduler's shelve: the cron and zone are the whole state.
        return (self.__class__, (self.cron, self.timezone_name))

    def __repr__(self) -> str:
        return f"<CronTickSchedule {self.cron!r} {self.timezone_name}>"


def beat_schedule_for(
    specs: Iterable[ScheduleSpec],
    task_name: str = SCHEDULED_RUN_TASK,
    *,
    queue: str,
) -> dict[str, dict[str, Any]]:
    """Celery ``beat_schedule`` entries for the enabled ``specs``, keyed by schedule name.

    Each fire runs ``task_name`` with ``(schedule_name,)`` and ``tick=<ISO UTC>``. Scheduled
    runs are short coordinators (they enqueue and drain), so they go to the sweep queue and
    never wait behind long LLM consolidations.
    """
    return {
        spec.name: {
            "task": task_name,
            "schedule": CronTickSchedule(spec.cron, spec.timezone),
            "args": (spec.name,),
            "options": {"queue": queue},
        }
        for spec in specs
        if spec.enabled
    }


class MemworkerScheduler(Scheduler):  # type: ignore[misc]  # celery ships no type hints
    """Beat scheduler that passes each cron fire its tick, writes a heartbeat every loop and,
    with a beat lock (``memworker_beat_lock`` in the app's config: a
    :class:`~worker.queue.deployment.BeatLock`), schedules only while it holds the lock.

    The heartbeat path comes from ``heartbeat_path`` or the app setting
    ``memworker_beat_heartbeat``; without either, no heartbeat is written. A standby beat
    writes its heartbeat too: it is healthy, waiting to take over.
    """

    max_interval: float

    def __init__(
        self, app: Celery, *args: Any, heartbeat_path: Path | None = None, **kwargs: Any
    ) -> None:
        configured = app.conf.get(HEARTBEAT_CONF_KEY)
        self.heartbeat_path = heartbeat_path or (Path(configured) if configured else None)
        self.lock: BeatLock | None = app.conf.get(BEAT_LOCK_CONF_KEY)
        self._holding: bool | None = None
        self._lock_state: str | None = None
        self._redis_watched = bool(app.conf.get(BEAT_REDIS_WATCHED_CONF_KEY))
        super().__init__(app, *args, **kwargs)
        # Beat sleeps at most this long, so the heartbeat stays fresh even with no entry due,
        # and a standby looks at the lock a few times per lock lifetime.
        self.max_interval = min(float(self.max_interval), HEARTBEAT_INTERVAL_SECONDS)
        if self.lock is not None:
            self.max_interval = min(self.max_interval, self.lock.ttl_seconds / 3)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if self.lock is not None and not self._hold_lock():
            self._write_heartbeat()
            return self.max_interval  # standby: schedule nothing, look again later
        delay = float(super().tick(*args, **kwargs))
        self._write_heartbeat()
        return delay

    def close(self) -> None:
        # Celery's stop handler calls this first: from here on the process ends in bounded
        # time, even when releasing the lock waits on a Redis that never answers.
        if stop_seconds := self.app.conf.get(BEAT_STOP_CONF_KEY):
            stop_within(float(stop_seconds))
        if self.lock is not None and self._holding:
            try:
                self.lock.release()  # a standby takes over at its next loop
            except MemworkerError:
                logger.warning("beat: could not release the beat lock; it expires by itself")
        super().close()

    def _hold_lock(self) -> bool:
        """Hold (or renew) the lock; log once per change of state, saying what this beat waits
        for: its own lock, another beat (named), or Redis itself."""
        assert self.lock is not None
        try:
            holding = self.lock.hold()
        except MemworkerError as exc:
            self._log_state(
                "no-redis",
                "beat: Redis is unreachable, so the beat lock cannot be held (%s); scheduling "
                "nothing until Redis answers",
                exc,
            )
            self._holding = False
            return False
        if holding and self.lock.took_over is not None:
            self._log_state(
                "holding",
                "beat: %s died holding the deployment's beat lock; took it over, scheduling",
                self.lock.took_over.describe(),
            )
        elif holding:
            self._log_state("holding", "beat: holding the deployment's beat lock; scheduling")
        else:
            holder = self.lock.holder
            who = holder.describe() if holder is not None else "another beat"
            self._log_state(
                f"standby:{who}",
                "beat: %s holds the deployment's beat lock; standing by, taking over when it "
                "stops renewing the lock (within %.0f s; at once if it dies on this host)",
                who,
                self.lock.ttl_seconds + self.max_interval,
            )
        self._holding = holding
        return holding

    def _log_state(self, state: str, message: str, *args: object) -> None:
        """One line per change of the lock's state, never one per loop. Where a supervisor
        watches Redis, an outage is its to say (the beat still says when it holds the lock)."""
        previous, self._lock_state = self._lock_state, state
        if state == previous:
            return
        if self._redis_watched and state == "no-redis":
            logger.debug(message, *args)
            return
        logger.warning(message, *args)

    def _write_heartbeat(self) -> None:
        if self.heartbeat_path is not None:
            try:
                write_heartbeat(self.heartbeat_path, _as_utc(self.app.now()))
            except OSError:
                # A full disk must not stop scheduling; the stale heartbeat tells the operator.
                logger.exception("beat: cannot write heartbeat %s", self.heartbeat_path)

    def apply_async(
        self,
        entry: ScheduleEntry,
        producer: Any = None,
        advance: bool = True,
        **kwargs: Any,
    ) -> Any:
        entry = self.reserve(entry) if advance else entry
        return super().apply_async(with_tick(entry), producer=producer, advance=False, **kwargs)


def with_tick(entry: ScheduleEntry) -> ScheduleEntry:
    """``entry`` with ``tick=<ISO UTC>`` added to its kwargs when it is a cron-tick entry.

    The tick is the latest cron tick at the schedule's current time; entries with other
    schedules (the sweep's interval) are returned unchanged.
    """
    schedule = entry.schedule
    if not isinstance(schedule, CronTickSchedule):
        return entry
    # A shallow copy without re-running __init__ (copy.copy would, through __reduce__, and
    # that resets the shared schedule's app); the scheduler's own entry stays unchanged.
    fired = ScheduleEntry.__new__(type(entry))
    fired.__dict__.update(vars(entry))
    tick = schedule.due_tick(schedule.now_utc())
    fired.kwargs = {**(entry.kwargs or {}), TICK_KWARG: format_tick(tick)}
    return fired


def _as_utc(value: datetime) -> datetime:
    # Celery hands naive datetimes around when a stored schedule predates enable_utc; with
    # ``timezone = "UTC"`` (design §7) naive values are UTC.
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
