"""Consolidate one namespace now, by hand, through the same claim and fence as the workers.

Safe while workers run: a namespace is consolidated only under its queue lease (a namespace a
worker holds is reported, not touched) and commits go through the database fence and the
unique ledger, so nothing is merged twice. A dry run takes no lease and writes nothing.
Reconciling several (``--all``, or one after a re-scan) publishes what was committed and reads
back each changed file's own version.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import redis

from worker.errors import NotFound, QueueUnavailable, StoreUnavailable
from worker.models import Candidate, Namespace
from worker.outcomes import Outcome
from worker.queue.redis_queue import RedisQueue
from worker.service.batch import BatchResult
from worker.service.bulkhead import Bulkhead
from worker.service.consolidate import Pipeline
from worker.service.preview import preview
from worker.service.progress import Progress, no_progress
from worker.service.publish import DeliveryReport, publish_now
from worker.service.scan import SourceScan
from worker.sinks.base import Sink
from worker.store.memory import MemoryStore

#: Failures that end ``reconcile --all`` at once instead of setting one namespace aside: Redis
#: or the database is down, so every namespace after it would fail alike, and the operator is
#: owed the outage's own exit code (4), not a page of namespaces that each "failed".
OUTAGES: Final = (QueueUnavailable, StoreUnavailable, redis.ConnectionError, redis.TimeoutError)

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
    state = queue.admin.namespace_state(namespace)
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
            queue.admin,
            pipeline.store,
            pipeline.consolidator,
            pipeline.settings,
            namespace,
            extra=extra,
            max_batch=queue.settings.max_batch,
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
        if queue.admin.namespace_state(namespace).leased:
            return Reconciled(namespace, Outcome.LEASED, note=LEASED_NOTE)
        return Reconciled(namespace, Outcome.NOTHING_PENDING)
    result = pipeline.consolidate(claim, trigger="reconcile")
    return Reconciled(namespace, result.outcome, result)


def _no_namespace_progress(_namespace: str) -> None:
    return None


def reconcile_each(
    pipeline: Pipeline,
    namespaces: Sequence[str],
    *,
    dry_run: bool = False,
    extra: Callable[[str], Sequence[Candidate]] = lambda _namespace: (),
    now: datetime,
    progress: Callable[[str], None] = _no_namespace_progress,
) -> list[Reconciled]:
    """:func:`reconcile_namespace` for each of ``namespaces`` (``reconcile --all``), each behind
    its own bulkhead: a namespace whose step raises (a corrupt log entry a preview cannot read,
    a Redis error on its key) is reported ``failed`` with the reason it was set aside, and the
    others are reconciled all the same; an outage (:data:`OUTAGES`) is raised at once.
    ``progress`` is called after each namespace."""
    bulkhead = Bulkhead("reconcile")
    done = []
    for namespace in namespaces:
        result = bulkhead.run(
            namespace,
            lambda n=namespace: reconcile_namespace(  # type: ignore[misc]
                pipeline, n, dry_run=dry_run, extra=extra(n), now=now
            ),
            stops=OUTAGES,
        )
        if result is None:
            note = f"set aside: {bulkhead.set_aside[-1].reason}"
            result = Reconciled(namespace, Outcome.FAILED, note=note)
        done.append(result)
        progress(namespace)
    return done


@dataclass(frozen=True)
class ReconcileRun:
    """Each namespace's outcome, each committed file's own version (by namespace, then path),
    and what publishing the commits delivered (None when nothing was committed)."""

    done: list[Reconciled]
    versions: dict[str, dict[str, int]]
    delivery: DeliveryReport | None


def reconcile_targets(
    pipeline: Pipeline,
    sinks: Mapping[str, Sink],
    target: Namespace | None,
    *,
    scan: SourceScan | None = None,
    dry_run: bool = False,
    now: datetime,
    progress: Progress = no_progress,
) -> ReconcileRun:
    """Reconcile ``target`` (every namespace the queue or ``scan`` knows when None), publish
    the commits, and read back the versions. ``scan`` is a re-scan made just before: its
    namespaces count as known, and a dry run previews its candidates with the queued ones."""
    queue, store = pipeline.queue, pipeline.store
    if target is None:
        keys = sorted(set(queue.admin.namespaces()) | set(scan.by_namespace if scan else ()))
    else:
        if not (scan and scan.by_namespace.get(target.key)):
            require_known(store, queue, target)
        keys = [target.key]
    with progress(len(keys)) as advance:
        done = reconcile_each(
            pipeline,
            keys,
            dry_run=dry_run,
            extra=lambda key: scan.by_namespace.get(key, []) if scan and dry_run else [],
            now=now,
            progress=advance,
        )
    committed = [r.namespace for r in done if r.outcome is Outcome.COMMITTED]
    delivery = publish_now(store, sinks, namespaces=committed) if committed else None
    versions = {r.namespace: file_versions(store, r) for r in done}
    return ReconcileRun(done, versions, delivery)


def require_known(store: MemoryStore, queue: RedisQueue, ns: Namespace) -> None:
    """:class:`NotFound` unless the store has memory for ``ns`` or the queue knows it."""
    if ns.key in store.namespaces(scope=ns.scope.value, user_id=ns.user_id):
        return
    if queue.admin.namespace_state(ns.key).known:
        return
    raise NotFound(
        f"{ns.key} is unknown: it has no memory and nothing queued; check the id "
        "(`memworker status` shows the queue)"
    )


def file_versions(store: MemoryStore, r: Reconciled) -> dict[str, int]:
    """Each changed file's own version in the namespace revision this run committed (none for
    a dry run): what ``memworker history`` lists for that file."""
    res = r.result
    if r.outcome is not Outcome.COMMITTED or res is None or res.version is None:
        return {}
    versions = {}
    for change in res.files:
        for v in store.file_history(r.namespace, change.path):
            if v.namespace_version == res.version:
                versions[change.path] = v.version
    return versions
