"""What a batch's outcome moves in the metrics: the one place results become numbers."""

from __future__ import annotations

from worker import metrics
from worker.service.batch import BatchResult


def observe_batch(result: BatchResult, seconds: float) -> None:
    """Count one consolidation attempt: its outcome, its time, its model use, a failure."""
    metrics.CONSOLIDATION_SECONDS.observe(seconds)
    metrics.CONSOLIDATIONS.labels(outcome=result.outcome.value).inc()
    if result.outcome.undone:
        metrics.FAILURES.labels(stage="consolidate").inc()
    metrics.LLM_CALLS.inc(result.llm_calls)
    metrics.LLM_TOKENS.labels(kind="input").inc(result.prompt_tokens)
    metrics.LLM_TOKENS.labels(kind="output").inc(result.completion_tokens)
