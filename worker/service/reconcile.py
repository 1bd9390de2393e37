"""Consolidate one namespace now, by hand, through the same claim and fence as the workers.

Safe while workers run: a namespace is consolidated only under its queue lease (a namespace a
worker holds is reported, not touched) and commits go through the database fence and the
unique ledger, so nothing is merged twice. A dry run takes no lease and writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from worker.models import Candidate
from worker.outcomes import Outcome
from worker.service.batch import BatchResult
from worker.service.bulkhead import Bulkhead
from worker.service.consolidate import Pipeline
from worker.service.preview import preview

#: Why a leased namespace was left alone.
LEASED_NOTE = (
    "being consolidated by a worker now; that worker commits it (candidates that arrived "
    "meanwhile are merged in the next batch)"
)


@dataclass(frozen=True)
class Reconciled:
    """What reconcile did for one namespace (``result`` when it consolidated or previewed)."""

    namespace: str
    outcome: Outcome
    result: BatchResult | None = None
    note: str | None = None


def reconcile_namespace(
    pipeline: Pipeline,
    namespace: str,
    *,
    dry_run: bool = False,
    extra: Sequence[Candidate] = (),
    now: datetime,
) -> Reconciled:
    """Consolidate (or, with ``dry_run``, preview with ``extra`` candidates) ``namespace``."""
    queue = pipeline.queue
    state = queue.namespace_state(namespace)
    if state.leased:
        return Reconciled(namespace, Outcome.LEASED, note=LEASED_NOTE)
    if state.dead:
        return Reconciled(
            namespace,
            Outcome.DEAD_LETTERED,
            note=f"dead-lettered after {state.attempts} attempt(s) (last error: "
            f"{state.last_error or 'none recorded'}); `memworker dlq retry {namespace}` brings it "
            "back",
        )
    if dry_run:
        result = preview(
            queue,
            pipeline.store,
            pipeline.consolidator,
            pipeline.settings,
            namespace,
            extra=extra,
            max_batch=pipeline.settings.max_batch,
            now=now,
        )
        if result.outcome is Outcome.NOTHING_NEW and not result.skipped:
            return Reconciled(namespace, Outcome.NOTHING_PENDING, result)
        return Reconciled(namespace, result.outcome, result)
    claim = queue.claim_namespace(namespace)
    if claim is None and pipeline.edits is not None:
        # Nothing queued, but an agent may have edited a file: its edit makes the batch.
        edits = pipeline.agent_edits(namespace)
        if edits:
            queue.enqueue_many(edits)
            claim = queue.claim_namespace(namespace)
    if claim is None:
        # A worker may have claimed it since we looked: say so rather than "nothing pending".
        if queue.namespace_state(namespace).leased:
            return Reconciled(namespace, Outcome.LEASED, note=LEASED_NOTE)
        return Reconciled(namespace, Outcome.NOTHING_PENDING)
    result = pipeline.consolidate(claim, trigger="reconcile")
    return Reconciled(namespace, result.outcome, result)


def _nothing(_namespace: str) -> None:
    return None


def reconcile_each(
    pipeline: Pipeline,
    namespaces: Sequence[str],
    *,
    dry_run: bool = False,
    extra: Callable[[str], Sequence[Candidate]] = lambda _namespace: (),
    now: datetime,
    progress: Callable[[str], None] = _nothing,
) -> list[Reconciled]:
    """:func:`reconcile_namespace` for each of ``namespaces`` (``reconcile --all``), each behind
    its own bulkhead: a namespace whose step raises (a corrupt log entry a preview cannot read,
    a Redis error on its key) is reported ``failed`` with the reason it was set aside, and the
    others are reconciled all the same. ``progress`` is called after each namespace."""
    bulkhead = Bulkhead("reconcile")
    done = []
    for namespace in namespaces:
        result = bulkhead.run(
            namespace,
            lambda n=namespace: reconcile_namespace(  # type: ignore[misc]
                pipeline, n, dry_run=dry_run, extra=extra(n), now=now
            ),
        )
        if result is None:
            note = f"set aside: {bulkhead.set_aside[-1].reason}"
            result = Reconciled(namespace, Outcome.FAILED, note=note)
        done.append(result)
        progress(namespace)
    return done
