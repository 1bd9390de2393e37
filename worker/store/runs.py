"""The ``runs`` table: one row per consolidation run, whatever its outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from worker.errors import StoreRefused
from worker.outcomes import RUN_OUTCOMES
from worker.store.records import RUN_TRIGGERS, RunInfo, RunRecord
from worker.store.schema import runs
from worker.store.sqltypes import require_utc

#: Built once (:mod:`worker.store.prebuilt`): every batch writes a run. Its values come as
#: the execution's parameters, one per column.
_INSERT_RUN: Final = sa.insert(runs).returning(runs.c.id)


def insert_run(conn: Connection, run: RunRecord, *, namespace: str | None = None) -> int:
    """Write ``run`` (``namespace`` overrides the record's) and return its id."""
    if run.trigger not in RUN_TRIGGERS:
        raise StoreRefused(
            f"run trigger {run.trigger!r} is not one of {', '.join(sorted(RUN_TRIGGERS))}"
        )
    if run.outcome not in RUN_OUTCOMES:
        raise StoreRefused(
            f"run outcome {run.outcome!r} is not one of {', '.join(sorted(RUN_OUTCOMES))}"
        )
    window = run.window
    row: dict[str, Any] = {
        "trigger": run.trigger,
        "namespace": namespace if namespace is not None else run.namespace,
        "schedule": run.schedule,
        "tick": run.tick,
        "window_start": window[0] if window else None,
        "window_end": window[1] if window else None,
        "started_at": require_utc(run.started_at, "run.started_at"),
        "finished_at": run.finished_at,
        "outcome": run.outcome,
        "error": run.error,
        "candidates": run.candidates,
        "counts": dict(run.counts),
        "llm_calls": run.llm_calls,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
    }
    return int(conn.execute(_INSERT_RUN, row).scalar_one())


def list_runs(conn: Connection, *, namespace: str | None, limit: int) -> list[RunInfo]:
    """The newest ``limit`` runs, of one namespace or of all."""
    stmt = sa.select(runs).order_by(runs.c.id.desc()).limit(limit)
    if namespace is not None:
        stmt = stmt.where(runs.c.namespace == namespace)
    return [
        RunInfo(
            id=int(r.id),
            trigger=r.trigger,
            namespace=r.namespace,
            schedule=r.schedule,
            tick=r.tick,
            window=(r.window_start, r.window_end) if r.window_start and r.window_end else None,
            started_at=r.started_at,
            finished_at=r.finished_at,
            outcome=r.outcome,
            error=r.error,
            candidates=r.candidates,
            counts=dict(r.counts),
            llm_calls=r.llm_calls,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
        )
        for r in conn.execute(stmt)
    ]


def count_runs(conn: Connection, *, outcome: str, since: datetime) -> int:
    """How many runs with ``outcome`` started at or after ``since``."""
    since = require_utc(since, "since")
    stmt = sa.select(sa.func.count()).where(runs.c.outcome == outcome, runs.c.started_at >= since)
    return int(conn.execute(stmt).scalar_one())
