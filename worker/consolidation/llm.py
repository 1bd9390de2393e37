"""The LLM consolidation agent: one structured-output call per batch, validated, repaired once.

Flow for a batch:

1. ``fact`` candidates that trip a guard are rejected before the model sees them (a secret never
   leaves for a model API; other texts are shown with guarded spans redacted).
2. The rest is cut into chunks whose prompt fits ``token_budget`` (counted with
   ``count_tokens_approximately``: tiktoken downloads encodings at run time). Chunks are merged
   serially; each sees the state the previous chunks produced.
3. Per chunk: ONE call of ``model.with_structured_output(ConsolidationPlan, include_raw=True)``,
   tagged ``["memworker", "consolidation"]`` with the namespace in metadata. The answer's short
   ids are translated back (an unknown short id is a problem) and the plan is checked with
   :func:`~worker.consolidation.validate.validate_plan`. On any problem, ONE repair call gets
   the problem list; if that fails too, :class:`~worker.errors.InvalidPlan` is raised and the
   batch stays pending.
4. Calls and tokens are recorded on the plan, from ``usage_metadata`` (else approximated).

Model errors and timeouts raise :class:`~worker.errors.ModelUnavailable` (a
:class:`~worker.errors.ConsolidatorError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, Final, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from pydantic import BaseModel, Field

from worker.consolidation import guards
from worker.consolidation.apply import advance, apply_plan
from worker.consolidation.prompt import ShortIds, build_messages, candidate_line
from worker.consolidation.types import Add, Confirm, Invalidate, Operation, Plan, Reject, Supersede
from worker.consolidation.validate import validate_plan
from worker.constants import FACTS_PATH
from worker.errors import ConsolidatorError, InvalidPlan, ModelUnavailable
from worker.models import Candidate, Kind
from worker.settings import Settings
from worker.values import NamespaceState

#: Tags on every model call, so traces (LangSmith, callbacks) attribute them to this worker.
CALL_TAGS: Final = ("memworker", "consolidation")

#: Model calls per chunk: the plan, plus one repair carrying the problems. A model that fails
#: twice is unlikely to succeed a third time on the same input; the batch is retried later.
ATTEMPTS: Final = 2

#: Entries of a chunk's interim state are never evicted (eviction is the final apply's job).
_NO_BUDGET: Final = 1 << 62


class PlanOp(BaseModel):
    """One operation of the plan, over the short ids shown in the prompt."""

    op: Literal["add", "confirm", "supersede", "invalidate", "reject"]
    candidates: list[str] = Field(
        default_factory=list, description="Candidate ids (C1, C2, …) this operation accounts for"
    )
    entry: str | None = Field(
        default=None, description="Existing entry id (E1, …) for confirm/supersede/invalidate"
    )
    text: str | None = Field(default=None, description="Entry text for add/supersede")
    path: str | None = Field(default=None, description="File path for add (optional for supersede)")
    key: str | None = Field(default=None, description="Optional slot key, e.g. preference.language")
    reason: str | None = Field(default=None, description="Why, for supersede/invalidate/reject")


class ConsolidationPlan(BaseModel):
    """The operations that merge the candidates into the memories; every candidate is used."""

    ops: list[PlanOp]


def translate(answer: ConsolidationPlan, ids: ShortIds) -> tuple[list[Operation], list[str]]:
    """The answer over real ids, and the problems (unknown short ids, missing fields).

    >>> ids = ShortIds(entries={"E1": "e-real"}, candidates={"C1": "c-real"})
    >>> ops, problems = translate(ConsolidationPlan(ops=[PlanOp(op="confirm", candidates=["C1"],
    ...     entry="E1")]), ids)
    >>> (ops[0].entry_id, ops[0].candidate_ids, problems)
    ('e-real', ['c-real'], [])
    >>> translate(ConsolidationPlan(ops=[PlanOp(op="reject", candidates=["C9"])]), ids)[1]
    ['operation 1 (reject): unknown candidate id C9; use only the C ids shown']
    """
    ops: list[Operation] = []
    problems: list[str] = []
    for index, raw in enumerate(answer.ops, 1):
        label = f"operation {index} ({raw.op})"
        cids = []
        for short in raw.candidates:
            if short in ids.candidates:
                cids.append(ids.candidates[short])
            else:
                problems.append(f"{label}: unknown candidate id {short}; use only the C ids shown")
        entry_id: str | None = None
        if raw.op in ("confirm", "supersede", "invalidate"):
            entry_id = ids.entries.get(raw.entry or "")
            if entry_id is None:
                problems.append(f"{label}: unknown entry id {raw.entry}; use only the E ids shown")
                continue
        if raw.op in ("add", "supersede") and not (raw.text or "").strip():
            problems.append(f"{label}: text is missing")
            continue
        text = (raw.text or "").strip()
        if raw.op == "add":
            ops.append(Add(candidate_ids=cids, path=raw.path or FACTS_PATH, text=text, key=raw.key))
        elif raw.op == "confirm":
            assert entry_id is not None
            ops.append(Confirm(candidate_ids=cids, entry_id=entry_id))
        elif raw.op == "supersede":
            assert entry_id is not None
            ops.append(
                Supersede(
                    candidate_ids=cids, entry_id=entry_id, text=text, key=raw.key,
                    path=raw.path, reason=raw.reason or "superseded",
                )
            )  # fmt: skip
        elif raw.op == "invalidate":
            assert entry_id is not None
            reason = raw.reason or "invalidated by the consolidation agent"
            ops.append(Invalidate(candidate_ids=cids, entry_id=entry_id, reason=reason))
        else:
            reason = raw.reason or "rejected by the consolidation agent"
            ops.append(Reject(candidate_ids=cids, reason=reason))
    return ops, problems


class LLMConsolidator:
    """Consolidation by a LangChain chat model (any provider; see the module docs)."""

    name: ClassVar[str] = "llm"
    needs_model: ClassVar[bool] = True
    handles_turns: ClassVar[bool] = True

    def __init__(
        self, model: BaseChatModel, *, token_budget: int, max_text_bytes: int, max_removals: int
    ) -> None:
        self.model = model
        self.token_budget = token_budget
        self.max_text_bytes = max_text_bytes
        self.max_removals = max_removals

    @classmethod
    def from_settings(
        cls, settings: Settings, *, model: BaseChatModel | None = None
    ) -> LLMConsolidator:
        if model is None:
            raise ConsolidatorError("LLMConsolidator needs a model; set MEMWORKER_MODEL")
        return cls(
            model,
            token_budget=settings.model_token_budget,
            max_text_bytes=settings.max_text_bytes,
            max_removals=settings.max_removals_per_run,
        )

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        unique = sorted({c.id: c for c in batch}.values(), key=lambda c: (c.created_at, c.id))
        run = _Run(self, state, now)
        for cand in unique:
            reason = guards.violation(cand.text) if cand.kind is Kind.FACT else None
            if reason is not None:
                run.ops.append(Reject(candidate_ids=[cand.id], reason=reason))
        rest = [c for c in unique if not (c.kind is Kind.FACT and guards.violation(c.text))]
        while rest:
            chunk, rest = run.take(rest)
            run.merge_chunk(chunk)
        return Plan(
            ops=run.ops,
            llm_calls=run.calls,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
        )


class _Run:
    """One ``merge``: the interim state between chunks and the usage so far."""

    def __init__(self, owner: LLMConsolidator, state: NamespaceState, now: datetime) -> None:
        self.owner = owner
        self.original = {e.id for e in state.entries if e.active}
        self.state = state
        self.now = now
        self.ops: list[Operation] = []
        self.removals = 0
        self.calls = self.prompt_tokens = self.completion_tokens = 0

    def take(self, pending: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
        """The longest prefix of ``pending`` whose prompt fits the budget (at least one)."""
        used = count_tokens_approximately(build_messages(self.state, [])[0])
        for n, cand in enumerate(pending):
            used += count_tokens_approximately([candidate_line(f"C{n + 1}", cand)])
            if used > self.owner.token_budget and n > 0:
                return pending[:n], pending[n:]
        return pending, []

    def merge_chunk(self, chunk: list[Candidate]) -> None:
        messages, ids = build_messages(self.state, chunk)
        problems: list[str] = []
        for _attempt in range(ATTEMPTS):
            if problems:
                messages, ids = build_messages(self.state, chunk, problems=problems)
            ops, problems = self._ask(messages, ids)
            plan = Plan(ops=ops)
            if not problems:
                problems = validate_plan(
                    self.state, chunk, plan,
                    max_removals=self.owner.max_removals - self.removals,
                    max_text_bytes=self.owner.max_text_bytes,
                )  # fmt: skip
            if not problems:
                self._accept(chunk, plan)
                return
        raise InvalidPlan(problems)

    def _accept(self, chunk: list[Candidate], plan: Plan) -> None:
        self.ops += plan.ops
        self.removals += sum(
            isinstance(op, Supersede | Invalidate) and op.entry_id in self.original
            for op in plan.ops
        )
        applied = apply_plan(
            self.state, chunk, plan, now=self.now, current_files={},
            file_budget_bytes=_NO_BUDGET, sensitive_paths=(),
        )  # fmt: skip
        self.state = advance(self.state, applied)

    def _ask(self, messages: list[BaseMessage], ids: ShortIds) -> tuple[list[Operation], list[str]]:
        structured = self.owner.model.with_structured_output(ConsolidationPlan, include_raw=True)
        config: Any = {
            "tags": list(CALL_TAGS),
            "metadata": {"namespace": self.state.namespace},
            "run_name": "memworker.consolidate",
        }
        try:
            result = structured.invoke(messages, config=config)
        except Exception as exc:  # any provider error, timeout or transport failure
            raise ModelUnavailable(
                f"the consolidation model failed for {self.state.namespace}: "
                f"{type(exc).__name__}: {exc}; the batch stays pending and is retried"
            ) from exc
        raw = result.get("raw") if isinstance(result, dict) else None
        self._count(messages, raw)
        parsed = result.get("parsed") if isinstance(result, dict) else None
        if not isinstance(parsed, ConsolidationPlan):
            error = result.get("parsing_error") if isinstance(result, dict) else None
            detail = f": {str(error)[:300]}" if error else ""
            return [], [
                "the answer did not match the ConsolidationPlan schema" + detail
                + "; answer with one ConsolidationPlan holding all operations"
            ]  # fmt: skip
        return translate(parsed, ids)

    def _count(self, messages: list[BaseMessage], raw: object) -> None:
        self.calls += 1
        usage = raw.usage_metadata if isinstance(raw, AIMessage) else None
        if usage:
            self.prompt_tokens += usage["input_tokens"]
            self.completion_tokens += usage["output_tokens"]
            return
        self.prompt_tokens += count_tokens_approximately(messages)
        if isinstance(raw, AIMessage):
            self.completion_tokens += count_tokens_approximately([raw])
