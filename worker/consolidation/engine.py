"""One batch through the consolidator: merge → validate → apply, for the pipeline to commit.

>>> from datetime import UTC, datetime
>>> from worker.consolidation.rules import RulesConsolidator
>>> from worker.values import NamespaceState
>>> from worker.models import make_candidate
>>> from worker.settings import Settings
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", now=t)
>>> plan, applied = consolidate_batch(RulesConsolidator(), NamespaceState("user:u1", 0, None),
...     [c], now=t, settings=Settings().for_consolidation, current_files={})
>>> print(applied.files[0].content, end="")
# Preferences
<BLANKLINE>
- I prefer tea
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from worker.consolidation.apply import apply_plan
from worker.consolidation.base import Consolidator
from worker.consolidation.types import Operation, Plan, Reject
from worker.consolidation.validate import validate_plan
from worker.errors import ConsolidatorError, InvalidPlan, MemworkerError
from worker.models import Candidate
from worker.namespaces import reserved_prefix
from worker.values import AppliedPlan, NamespaceState


class Limits(Protocol):
    """The settings a batch is held to; the consolidation slice
    (:class:`~worker.slices.ConsolidationSettings`) satisfies it."""

    @property
    def max_removals_per_run(self) -> int: ...
    @property
    def max_text_bytes(self) -> int: ...
    @property
    def file_budget_bytes(self) -> int: ...
    @property
    def sensitive_paths(self) -> Collection[str]: ...
    @property
    def inbox_route(self) -> str: ...


@dataclass(frozen=True)
class Merge:
    """One batch merged: the ``batch`` the ledger did not hold yet (each id once), how many of
    the given candidates were ``skipped``, the plan and what applying it writes (both None when
    nothing was new)."""

    batch: Sequence[Candidate]
    skipped: int
    plan: Plan | None = None
    applied: AppliedPlan | None = None


def merge_new(
    consolidator: Consolidator,
    state: NamespaceState,
    candidates: Sequence[Candidate],
    *,
    recorded: Set[str],
    current_files: Mapping[str, str],
    now: datetime,
    settings: Limits,
) -> Merge:
    """Merge the ``candidates`` that the ledger (``recorded``) does not hold into ``state``.

    **The ledger is the proof.** A candidate is skipped only because the unique ledger holds
    it, so a batch committed whose ack was lost merges nothing twice; a retried capture
    enqueued twice merges once.
    """
    batch = _unique([c for c in candidates if c.id not in recorded])
    skipped = len(candidates) - len(batch)
    if not batch:
        return Merge(batch, skipped)
    plan, applied = consolidate_batch(
        consolidator, state, batch, now=now, settings=settings, current_files=current_files
    )
    return Merge(batch, skipped, plan, applied)


def consolidate_batch(
    consolidator: Consolidator,
    state: NamespaceState,
    batch: Sequence[Candidate],
    *,
    now: datetime,
    settings: Limits,
    current_files: Mapping[str, str],
) -> tuple[Plan, AppliedPlan]:
    """Merge ``batch`` into ``state``; raise InvalidPlan (batch stays pending) on any problem.

    A consolidator's unexpected exception becomes :class:`ConsolidatorError`, so the pipeline
    handles one family of errors. A candidate whose path is reserved (under the deployment's
    inbox route, which a hot-path client cannot know) is rejected here, named, so it neither
    reaches the consolidator nor fails the rest of its batch.
    """
    refused = _reserved_rejects(batch, (settings.inbox_route,))
    held = {cid for op in refused for cid in op.candidate_ids}
    rest = [c for c in batch if c.id not in held]
    try:
        plan = consolidator.merge(state, rest, now=now) if rest else Plan()
    except MemworkerError:
        raise
    except Exception as exc:
        raise ConsolidatorError(
            f"consolidator {consolidator.name!r} failed on {state.namespace}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if refused:
        plan = plan.model_copy(update={"ops": [*plan.ops, *refused]})
    problems = validate_plan(
        state, batch, plan,
        max_removals=settings.max_removals_per_run, max_text_bytes=settings.max_text_bytes,
        reserved=(settings.inbox_route,), meaning=getattr(consolidator, "meaning", None),
    )  # fmt: skip
    if problems:
        raise InvalidPlan(problems)
    applied = apply_plan(
        state, batch, plan, now=now, current_files=current_files,
        file_budget_bytes=settings.file_budget_bytes, sensitive_paths=settings.sensitive_paths,
    )  # fmt: skip
    return plan, applied


def _reserved_rejects(batch: Sequence[Candidate], reserved: Collection[str]) -> list[Operation]:
    """A reject for each candidate of ``batch`` whose path falls under a reserved prefix."""
    return [
        Reject(
            candidate_ids=[c.id],
            reason=f"path {c.path} is under the reserved prefix {prefix} (the inbox route); "
            "send it with another topic",
        )
        for c in batch
        if c.path is not None and (prefix := reserved_prefix(c.path, reserved)) is not None
    ]


def _unique(batch: Sequence[Candidate]) -> list[Candidate]:
    """First occurrence of each candidate id."""
    seen: set[str] = set()
    out = []
    for candidate in batch:
        if candidate.id not in seen:
            seen.add(candidate.id)
            out.append(candidate)
    return out
