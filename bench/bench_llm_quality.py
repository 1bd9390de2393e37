"""Memory quality of a consolidator: the same streams through the rules or any chat model.

``python -m bench llm_quality`` scores the rules consolidator (deterministic, no model);
``python -m bench llm_quality --model provider:model [--base-url URL] [--json]`` scores the LLM
agent with that model, built exactly as the worker builds it (the ``MEMWORKER_MODEL*``
settings), so a user can compare their model with the deterministic baseline on the same data.

Streams (:mod:`bench.llm_quality_streams`): keyed knowledge updates, duplicates and
paraphrases, forget requests, unkeyed contradictions, and paraphrases and contradictions
beside compatible near statements in three scripts (English, French, Chinese). Each user's
batches are merged in order through :func:`~worker.consolidation.plan.consolidate_batch`
(merge, validate, apply) into an in-memory state; a batch that fails (invalid plan, model
unavailable) keeps its candidates pending for the next batch, as the worker does. Measured
on each user's final active entries:

- *latest-value accuracy*: share of current values (last keyed value, the contradicting
  statement) that are visible;
- *stale values visible*: superseded values, contradicted ones and forgotten facts still visible;
- *duplicate entries*: entries beyond the first that hold the same fact;
- *wrongly invalidated*: unrelated facts that were stored and are gone at the end;
- calls, prompt and completion tokens per candidate (failed batches' calls included), failed
  batches.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from bench.llm_quality_streams import DEFAULT_USERS, STREAMS, UserStream
from worker.consolidation.loading import load_consolidator
from worker.consolidation.plan import Consolidator, advance, consolidate_batch
from worker.errors import BatchFailed, InvalidModelPlan
from worker.models import Candidate, NamespaceState, make_candidate
from worker.settings import Settings

_WORD_FREE: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
T0: Final = datetime(2025, 1, 1, tzinfo=UTC)
#: Batches of one user are merged this far apart (past any debounce, in creation order).
STEP: Final = timedelta(hours=1)
#: No eviction during the harness: a file budget would confound what the streams measure.
NO_FILE_BUDGET: Final = 1 << 30


@dataclass
class Score:
    """The counts behind the metrics of one stream (or of all of them)."""

    candidates: int = 0
    batches: int = 0
    failed_batches: int = 0
    latest_total: int = 0
    latest_visible: int = 0
    stale_total: int = 0
    stale_visible: int = 0
    duplicate_entries: int = 0
    controls_stored: int = 0
    wrongly_invalidated: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, other: Score) -> None:
        for name, value in asdict(other).items():
            if name == "errors":
                self.errors += other.errors
            else:
                setattr(self, name, getattr(self, name) + value)

    def metrics(self) -> dict[str, float | int | None]:
        """The reported figures (rates in 0…1, per-candidate averages)."""
        n = max(self.candidates, 1)
        return {
            "latest_value_accuracy": _rate(self.latest_visible, self.latest_total),
            "stale_values_visible": self.stale_visible,
            "stale_rate": _rate(self.stale_visible, self.stale_total),
            "duplicate_entries": self.duplicate_entries,
            "wrongly_invalidated": self.wrongly_invalidated,
            "wrongly_invalidated_rate": _rate(self.wrongly_invalidated, self.controls_stored),
            "calls_per_candidate": round(self.llm_calls / n, 3),
            "prompt_tokens_per_candidate": round(self.prompt_tokens / n, 1),
            "completion_tokens_per_candidate": round(self.completion_tokens / n, 1),
            "candidates": self.candidates,
            "batches": self.batches,
            "failed_batches": self.failed_batches,
        }


def _rate(part: int, whole: int) -> float | None:
    """``part / whole``; None (JSON null) when the stream has nothing to measure it on."""
    return round(part / whole, 3) if whole else None


def holds(text: str, marker: str) -> bool:
    """Whether an entry's text holds ``marker`` (a whole word, any case).

    >>> holds("I live in Oslo now", "oslo"), holds("Oslofjord", "Oslo"), holds("我住在北京", "北京")
    (True, False, True)

    A marker in a script written without spaces (Han, kana) is found anywhere in the text.
    """
    if _WORD_FREE.search(marker):
        return marker in text
    return re.search(rf"(?<!\w){re.escape(marker)}(?!\w)", text, re.IGNORECASE) is not None


def _visible(state: NamespaceState) -> list[str]:
    return [e.text for e in state.entries if e.active]


def score_user(consolidator: Consolidator, stream: UserStream, settings: Settings) -> Score:
    """Merge one user's batches in order and score the memory they leave."""
    score = Score()
    st = NamespaceState(f"user:{stream.user}", 0, None)
    pending: list[Candidate] = []
    ever_stored: set[str] = set()
    now = T0
    for b, items in enumerate(stream.batches):
        now += STEP
        pending += [
            make_candidate(
                user_id=stream.user, trace_id=f"t-{stream.user}", text=item.text,
                kind=item.kind, key=item.key, idempotency_key=f"{stream.user}-{b}-{i}",
                now=now - STEP / 2 + timedelta(seconds=i),
            )
            for i, item in enumerate(items)
        ]  # fmt: skip
        score.candidates += len(items)
        score.batches += 1
        try:
            plan, applied = consolidate_batch(
                consolidator, st, pending, now=now, settings=settings, current_files={}
            )
        except BatchFailed as exc:  # stays pending, as in the worker
            score.failed_batches += 1
            if isinstance(exc, InvalidModelPlan):  # a failed batch spent its calls too
                score.llm_calls += exc.llm_calls
                score.prompt_tokens += exc.prompt_tokens
                score.completion_tokens += exc.completion_tokens
            score.errors.append(f"{stream.user} batch {b + 1}: {type(exc).__name__}: {exc}"[:300])
            continue
        st = advance(st, applied)
        pending = []
        score.llm_calls += plan.llm_calls
        score.prompt_tokens += plan.prompt_tokens
        score.completion_tokens += plan.completion_tokens
        texts = _visible(st)
        ever_stored |= {m for m in stream.controls if any(holds(t, m) for t in texts)}
    texts = _visible(st)
    score.latest_total, score.stale_total = len(stream.latest), len(stream.stale)
    score.latest_visible = sum(any(holds(t, m) for t in texts) for m in stream.latest)
    score.stale_visible = sum(any(holds(t, m) for t in texts) for m in stream.stale)
    for marker in {*stream.facts, *stream.latest, *stream.controls}:
        score.duplicate_entries += max(0, sum(holds(t, marker) for t in texts) - 1)
    score.controls_stored = len(ever_stored)
    score.wrongly_invalidated = sum(
        not any(holds(t, m) for t in texts) for m in sorted(ever_stored)
    )
    return score


@dataclass
class Report:
    """Per-stream and total scores of one consolidator."""

    consolidator: str
    model: str | None
    users_per_stream: int
    streams: dict[str, Score]

    def total(self) -> Score:
        total = Score()
        for score in self.streams.values():
            total.add(score)
        return total

    def as_json(self) -> dict[str, Any]:
        return {
            "consolidator": self.consolidator,
            "model": self.model,
            "users_per_stream": self.users_per_stream,
            "streams": {name: s.metrics() for name, s in self.streams.items()},
            "total": self.total().metrics(),
            "errors": self.total().errors[:20],
        }

    def table(self) -> list[str]:
        """The report as aligned text lines."""
        columns = [
            ("stream", 13), ("latest acc", 10), ("stale vis", 9), ("dupes", 5),
            ("wrong inv", 9), ("calls/c", 7), ("prompt tok/c", 12), ("compl tok/c", 11),
            ("failed", 6),
        ]  # fmt: skip
        head = "  ".join(name.rjust(width) for name, width in columns)
        label = self.consolidator + (f" ({self.model})" if self.model else "")
        lines = [f"llm quality: {label}, {self.users_per_stream} users per stream", head]
        rows = [*self.streams.items(), ("total", self.total())]
        for name, score in rows:
            m = score.metrics()
            latest = f"{m['latest_value_accuracy']:.0%}" if score.latest_total else "-"
            cells = [
                name, latest,
                f"{m['stale_values_visible']}/{score.stale_total}", str(m["duplicate_entries"]),
                f"{m['wrongly_invalidated']}/{score.controls_stored}",
                f"{m['calls_per_candidate']:.2f}", f"{m['prompt_tokens_per_candidate']:.0f}",
                f"{m['completion_tokens_per_candidate']:.0f}",
                f"{m['failed_batches']}/{m['batches']}",
            ]  # fmt: skip
            lines.append("  ".join(c.rjust(w) for c, (_, w) in zip(cells, columns, strict=True)))
        return lines


def evaluate(
    consolidator: Consolidator,
    *,
    settings: Settings | None = None,
    users: int = DEFAULT_USERS,
    model: str | None = None,
    streams: Sequence[str] = tuple(STREAMS),
) -> Report:
    """Run every stream through ``consolidator`` and score it."""
    limits = (settings or Settings()).model_copy(update={"file_budget_bytes": NO_FILE_BUDGET})
    scores = {}
    for name in streams:
        score = Score()
        for user in STREAMS[name](users):
            score.add(score_user(consolidator, user, limits))
        scores[name] = score
    return Report(consolidator.name, model, users, scores)


def run() -> list[str]:
    """The baseline of ``python -m bench``: the rules consolidator on every stream."""
    settings = Settings()
    return evaluate(load_consolidator(settings.for_consolidation), settings=settings).table()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench llm_quality",
        description="Score a consolidator's memory quality on six streams (see the module docs).",
    )
    parser.add_argument("--model", help="provider:model (MEMWORKER_MODEL); default: the rules")
    parser.add_argument("--base-url", help="model server base URL (MEMWORKER_MODEL_BASE_URL)")
    parser.add_argument(
        "--method", default="auto",
        choices=["auto", "function_calling", "json_schema", "json_mode"],
        help="structured-output method (MEMWORKER_MODEL_STRUCTURED_METHOD)",
    )  # fmt: skip
    parser.add_argument(
        "--model-kwargs", default="{}", help="provider kwargs as JSON (MEMWORKER_MODEL_KWARGS)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per model call")
    parser.add_argument("--users", type=int, default=DEFAULT_USERS, help="users per stream")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Sequence[str], *, out: Callable[[str], None] = print) -> int:
    """``python -m bench llm_quality [options]``; returns the exit status."""
    args = _parser().parse_args(list(argv))
    try:
        kwargs = json.loads(args.model_kwargs)
    except json.JSONDecodeError as exc:
        out(f"--model-kwargs must be a JSON object: {exc}")
        return 2
    settings = Settings(
        model=args.model, model_base_url=args.base_url, model_structured_method=args.method,
        model_kwargs=kwargs, model_timeout_seconds=args.timeout,
    )  # fmt: skip
    report = evaluate(
        load_consolidator(settings.for_consolidation),
        settings=settings,
        users=args.users,
        model=args.model,
    )
    if args.json:
        out(json.dumps(report.as_json(), indent=2))
    else:
        for line in report.table():
            out(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
