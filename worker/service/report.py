"""What a batch's outcome moves in the metrics: the one place results become numbers."""

from __future__ import annotations

import logging
import threading

from worker import metrics
from worker.queue.types import PositionCheck
from worker.service.batch import BatchResult

log = logging.getLogger(__name__)

_reported_epochs: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


def observe_batch(result: BatchResult, seconds: float) -> None:
    """Count one consolidation attempt: its outcome, its time, its model use, a failure."""
    metrics.CONSOLIDATION_SECONDS.observe(seconds)
    metrics.CONSOLIDATIONS.labels(outcome=result.outcome.value).inc()
    if result.outcome.undone:
        metrics.FAILURES.labels(stage="consolidate").inc()
    metrics.LLM_CALLS.inc(result.llm_calls)
    metrics.LLM_TOKENS.labels(kind="input").inc(result.prompt_tokens)
    metrics.LLM_TOKENS.labels(kind="output").inc(result.completion_tokens)
    log.log(
        logging.WARNING if result.outcome.undone else logging.INFO,
        "%s",
        describe_batch(result, seconds),
    )


def describe_batch(result: BatchResult, seconds: float) -> str:
    """One line per consolidation, for the worker's log.

    >>> from worker.outcomes import Outcome
    >>> describe_batch(BatchResult("user:u1", Outcome.COMMITTED, candidates=3, version=2,
    ...                            counts={"added": 2, "unchanged": 1}), 0.042)
    'user:u1 committed v2: 3 candidate(s), added 2, unchanged 1 (0.04 s)'
    """
    parts = [f"{result.candidates} candidate(s)"]
    parts += [f"{kind} {n}" for kind, n in sorted(result.counts.items()) if n]
    if result.llm_calls:
        parts.append(f"{result.llm_calls} model call(s)")
    version = f" v{result.version}" if result.version is not None else ""
    line = f"{result.namespace} {result.outcome.value}{version}: {', '.join(parts)}"
    if result.error:
        line += f"; {result.error[:300]}"
    return f"{line} ({seconds:.2f} s)"


def observe_positions(namespace: str, check: PositionCheck) -> None:
    """Alarm when the queue lost its data (another epoch) or was rolled back (ids of the same
    epoch issued again to candidates that the ledger does not hold)."""
    if check.epoch_changed:
        _observe_epoch_change(namespace, check.recorded_epoch, check.epoch)
    elif check.reissued:
        _observe_rollback(namespace, check.reissued, check.applied_position)


def _observe_epoch_change(namespace: str, recorded: str | None, current: str | None) -> None:
    """Count a batch whose namespace was last committed in another queue epoch; log it at
    ERROR once per (old, new) epoch pair in this process, saying what it means."""
    metrics.QUEUE_EPOCH_CHANGES.inc()
    pair = (recorded or "?", current or "?")
    with _reported_lock:
        if pair in _reported_epochs:
            return
        _reported_epochs.add(pair)
    log.error(
        "queue epoch changed from %s to %s (first seen on %s): Redis lost its data since the "
        "last commit (restarted without AOF, flushed, evicted keys, or failed over to a stale "
        "replica). Candidates acknowledged to clients but not yet committed then are gone; "
        "nothing new is skipped (the ledger decides). Check Redis persistence "
        "(`memworker status`)",
        pair[0],
        pair[1],
        namespace,
    )


def _observe_rollback(namespace: str, reissued: int, applied_position: str | None) -> None:
    """Count a batch whose new candidates carry stream ids at or below SQL's applied position
    in the same epoch: Redis was restored from an older snapshot. Logged at ERROR, like an
    epoch change; the candidates are merged all the same (the ledger decides)."""
    metrics.QUEUE_EPOCH_CHANGES.inc()
    metrics.QUEUE_ROLLBACKS.inc()
    log.error(
        "queue rolled back on %s: %d new candidate(s) got stream ids at or below the position "
        "SQL last committed (%s) in the same epoch, so Redis was restored from an older "
        "snapshot (or a stale replica took over). Candidates queued after that snapshot and "
        "not yet committed are gone; the new ones are merged (the ledger decides). Check Redis "
        "persistence (`memworker status`)",
        namespace,
        reissued,
        applied_position,
    )
