"""The worker's lanes: one Celery queue each, consumed by its own process and pool.

A lane's threads only ever run that lane's tasks, so a dependency that hangs slows its own lane
and nothing else: a hung sink holds the *deliver* lane, a slow model the *consolidate* lane,
while the *sweep* lane keeps claiming due namespaces. ``memworker worker`` runs all three
lanes (one child process per lane); ``--lanes`` picks some, so each can be scaled on its own.

>>> [lane.name for lane in LANES.values()]
['sweep', 'consolidate', 'deliver']
>>> celery_argv(LANES["deliver"], key_prefix="mw", concurrency=2, loglevel="INFO")[:3]
['worker', '--queues=mw.deliver', '--pool=threads']
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from worker.errors import InvalidOption
from worker.task_names import CONSOLIDATE_LANE, DELIVER_LANE, SWEEP_LANE, queue_name


@dataclass(frozen=True)
class Lane:
    """One lane: its name, how many tasks it runs at once by default, and what it is for.
    Its Celery queue is :func:`~worker.task_names.queue_name` of the deployment's prefix."""

    name: str
    default_concurrency: int
    purpose: str


#: Every lane, in start order. Defaults: two sweep threads, so a scheduled run that waits on a
#: source never delays the next sweep; four merges (they wait on SQL and the model, not the
#: CPU); two deliverers (deliveries are claimed, so more deliverers never double one).
LANES: Final[dict[str, Lane]] = {
    SWEEP_LANE: Lane(SWEEP_LANE, 2, "claims due namespaces; runs scheduled ticks"),
    CONSOLIDATE_LANE: Lane(CONSOLIDATE_LANE, 4, "merges claimed batches"),
    DELIVER_LANE: Lane(DELIVER_LANE, 2, "publishes committed versions to sinks"),
}


def parse_lanes(value: str) -> list[Lane]:
    """``all`` or a comma-separated list of lane names.

    >>> [lane.name for lane in parse_lanes("deliver,sweep")]
    ['sweep', 'deliver']
    """
    names = [part.strip() for part in value.split(",") if part.strip()]
    if names == ["all"]:
        return list(LANES.values())
    unknown = [n for n in names if n not in LANES]
    if unknown or not names:
        raise InvalidOption(
            f"--lanes {value!r}: unknown lane(s) {unknown or [value]}; "
            f"use 'all' or a comma-separated list of {', '.join(LANES)}"
        )
    return [lane for name, lane in LANES.items() if name in names]


def celery_argv(
    lane: Lane, *, key_prefix: str, concurrency: int, loglevel: str, pool: str = "threads"
) -> list[str]:
    """Arguments of ``app.worker_main`` that run ``lane`` alone, under a node name of its own."""
    return [
        "worker",
        f"--queues={queue_name(key_prefix, lane.name)}",
        f"--pool={pool}",
        f"--concurrency={concurrency}",
        f"--loglevel={loglevel}",
        # Unique per process, so several lanes (and several workers) on one host never share a
        # Celery node name.
        f"--hostname={lane.name}.{os.getpid()}@%h",
        # Task events, so Flower (and `celery events`) can follow each lane.
        "--task-events",
        # No worker-to-worker chatter: mingle (revoked-task sync at start, a second of
        # waiting) and gossip (peer events) serve features memworker does not use, and
        # gossip's restart after a broker outage fails with a traceback in Celery 5.
        "--without-mingle",
        "--without-gossip",
    ]
