"""The LLM consolidation agent: one structured-output call per batch, validated, repaired once.

Flow for a batch:

1. ``fact`` candidates that trip a guard are rejected before the model sees them (a secret never
   leaves for a model API; other texts are shown with guarded spans redacted).
2. The rest is cut into chunks whose prompt fits ``token_budget`` (counted with
   ``count_tokens_approximately``: tiktoken downloads encodings at run time). Chunks are merged
   serially; each sees the state the previous chunks produced. Of a large memory the prompt
   shows only the entries the chunk can touch (:mod:`~worker.consolidation.focus`).
3. Per chunk: ONE call of ``model.with_structured_output(ConsolidationPlan, include_raw=True)``,
   tagged ``["memworker", "consolidation"]`` with the namespace in metadata. The plan is read
   strictly from the raw answer (:func:`~worker.consolidation.answer.strict_plan`: an answer
   cut off, filtered or incomplete is a problem, never completed); its short ids are translated
   back (an unknown short id is a problem) and the plan is checked with
   :func:`~worker.consolidation.validate.validate_plan`. On any problem, ONE repair call gets
   the problem list; if that fails too, :class:`~worker.errors.InvalidModelPlan` (an
   :class:`~worker.errors.InvalidPlan` carrying the calls and tokens spent) is raised and the
   batch stays pending.
4. Calls and tokens are recorded on the plan, from ``usage_metadata`` (else approximated).

The structured-output *method* is a list of at most two: the one to use and a fallback
(:func:`structured_methods` picks them for ``auto``). When the server rejects the first (an HTTP
4xx/5xx answer, or a model class that does not implement it), the call is repeated once with the
fallback, a warning is logged, and the fallback is kept for the consolidator's lifetime.

Every call has a deadline (``timeout_seconds``), enforced here whatever the provider does with
its own timeout. Provider errors, missed deadlines and refusals other than the request's own
fault raise :class:`~worker.errors.ModelUnavailable` (a
:class:`~worker.errors.ConsolidatorError` and an :class:`~worker.errors.Unavailable`): the
infrastructure failed, not the batch. A request refused as such (HTTP 400, 413, 422, after the
fallback) raises a plain :class:`~worker.errors.ConsolidatorError`: it would fail again
(:mod:`~worker.consolidation.provider_errors` tells them apart). Each chunk's plan is validated
against the state the previous chunks produced, and applied only when another chunk follows.

**Bulkheads.** One candidate never fails the others: a candidate whose prompt alone is over
``token_budget`` (a 1 MB conversation turn) is set aside with a ``Reject`` naming the reason
before anything is sent; a chunk the provider refuses as such is halved and each half tried
alone, down to the single candidate the provider will not take, which is set aside the same
way. The other candidates of the batch are merged.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately

from worker.consolidation import focus
from worker.consolidation.answer import (
    ConsolidationPlan,
    PlanOp,  # noqa: F401 - part of the answer's schema, named here with it
    UnusableAnswer,
    schema_hint,
    strict_plan,
    translate,
)
from worker.consolidation.apply import advance, apply_plan
from worker.consolidation.guard_meaning import refusal
from worker.consolidation.meaning import Meaning
from worker.consolidation.prompt import ShortIds, build_messages, candidate_line
from worker.consolidation.provider_errors import (
    RequestRefused,
    answer_problem,
    deadline_missed,
    method_rejected,
    provider_failure,
)
from worker.consolidation.rules import said_order
from worker.consolidation.types import Invalidate, Operation, Plan, Reject, Supersede
from worker.consolidation.validate import validate_plan
from worker.errors import ConfigurationError, ConsolidatorError, InvalidModelPlan, ModelUnavailable
from worker.models import Candidate, Kind
from worker.slices import ConsolidationSettings
from worker.values import NamespaceState

log = logging.getLogger(__name__)

#: A structured-output method of ``BaseChatModel.with_structured_output``.
Method = Literal["function_calling", "json_schema", "json_mode"]
METHODS: Final[tuple[Method, ...]] = get_args(Method)

#: Providers whose own API constrains decoding to a JSON schema (``auto`` tries that first).
#: OpenAI's only when no ``base_url`` points elsewhere: OpenAI-compatible servers differ
#: (llama.cpp answers json_schema with HTTP 500, forced tool calls work there).
_JSON_SCHEMA_FIRST: Final = frozenset({"openai", "ollama"})

#: Default deadline of a consolidator built directly (settings carry the configured one).
DEFAULT_TIMEOUT_SECONDS: Final = 120.0

#: Tags on every model call, so traces (LangSmith, callbacks) attribute them to this worker.
CALL_TAGS: Final = ("memworker", "consolidation")

#: Model calls per chunk: the plan, plus one repair carrying the problems. A model that fails
#: twice is unlikely to succeed a third time on the same input; the batch is retried later.
ATTEMPTS: Final = 2

#: Entries of a chunk's interim state are never evicted (eviction is the final apply's job).
_NO_BUDGET: Final = 1 << 62


def structured_methods(
    setting: str, *, provider: str | None, base_url: str | None
) -> tuple[Method, ...]:
    """The methods to try, in order: the setting itself, or for ``auto`` a first and a fallback.

    >>> structured_methods("auto", provider="openai", base_url=None)
    ('json_schema', 'function_calling')
    >>> structured_methods("auto", provider="openai", base_url="http://127.0.0.1:8080/v1")
    ('function_calling', 'json_schema')
    >>> structured_methods("json_mode", provider="anthropic", base_url=None)
    ('json_mode',)
    """
    if setting != "auto":
        if setting not in METHODS:
            raise ConfigurationError(
                f"MEMWORKER_MODEL_STRUCTURED_METHOD={setting!r}: use auto, " + ", ".join(METHODS)
            )
        return (setting,)
    if provider in _JSON_SCHEMA_FIRST and not (provider == "openai" and base_url):
        return ("json_schema", "function_calling")
    return ("function_calling", "json_schema")


class LLMConsolidator:
    """Consolidation by a LangChain chat model (any provider; see the module docs)."""

    name: ClassVar[str] = "llm"
    needs_model: ClassVar[bool] = True
    handles_turns: ClassVar[bool] = True

    def __init__(
        self,
        model: BaseChatModel,
        *,
        token_budget: int,
        max_text_bytes: int,
        max_removals: int,
        methods: Sequence[Method] = ("function_calling",),
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        meaning: Meaning | None = None,
    ) -> None:
        if not methods or any(m not in METHODS for m in methods):
            raise ConfigurationError(
                f"structured-output methods {list(methods)!r}: give one or two of "
                + ", ".join(METHODS)
            )
        self.model = model
        self.token_budget = token_budget
        self.max_text_bytes = max_text_bytes
        self.max_removals = max_removals
        self.methods: tuple[Method, ...] = tuple(methods)[:2]
        self.timeout_seconds = timeout_seconds
        #: Chooses the entries each prompt shows and checks the plan's removals (by meaning).
        self.meaning = meaning
        #: Index into ``methods`` of the one in use; moves to the fallback at most once.
        self._current = 0
        self._structured: dict[Method, Any] = {}

    @classmethod
    def from_settings(
        cls,
        settings: ConsolidationSettings,
        *,
        model: BaseChatModel | None = None,
        meaning: Meaning | None = None,
    ) -> LLMConsolidator:
        if model is None:
            raise ConsolidatorError("LLMConsolidator needs a model; set MEMWORKER_MODEL")
        provider = settings.model.partition(":")[0] if settings.model else None
        methods = structured_methods(
            settings.model_structured_method, provider=provider, base_url=settings.model_base_url
        )
        return cls(
            model,
            token_budget=settings.model_token_budget,
            max_text_bytes=settings.max_text_bytes,
            max_removals=settings.max_removals_per_run,
            methods=methods,
            timeout_seconds=settings.model_timeout_seconds,
            meaning=meaning,
        )

    @property
    def method(self) -> Method:
        """The structured-output method in use now."""
        return self.methods[self._current]

    def fall_back(self, exc: BaseException) -> bool:
        """Switch to the fallback method once, logged; False when there is none left."""
        if self._current + 1 >= len(self.methods):
            return False
        rejected, self._current = self.method, self._current + 1
        log.warning(
            "the model server rejected structured-output method %s (%s: %s); falling back to "
            "%s for the rest of this worker's life (set MEMWORKER_MODEL_STRUCTURED_METHOD to "
            "choose one)",
            rejected, type(exc).__name__, str(exc)[:200], self.method,
        )  # fmt: skip
        return True

    def structured(self) -> Any:
        """``with_structured_output`` for the method in use (built once per method)."""
        method = self.method
        if method not in self._structured:
            self._structured[method] = self.model.with_structured_output(
                ConsolidationPlan, method=method, include_raw=True
            )
        return self._structured[method]

    def merge(self, state: NamespaceState, batch: Sequence[Candidate], *, now: datetime) -> Plan:
        unique = sorted({c.id: c for c in batch}.values(), key=said_order)
        run = _Run(self, state, now)
        facts = [c.text.strip() for c in unique if c.kind is Kind.FACT]
        if self.meaning is not None:
            self.meaning.prepare(facts)  # for the guards by meaning; cached for the prompt
        for cand in unique:
            reason = refusal(cand.text, self.meaning) if cand.kind is Kind.FACT else None
            if reason is None:
                reason = run.oversized(cand)
            if reason is not None:
                run.ops.append(Reject(candidate_ids=[cand.id], reason=reason))
        rejected = {cid for op in run.ops for cid in op.candidate_ids}
        rest = [c for c in unique if c.id not in rejected]
        while rest:
            chunk, rest = run.take(rest)
            run.merge_isolated(chunk, last=not rest)
        run.set_aside_refused()
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
        #: Candidates the provider refused even alone, and whether it took any chunk at all.
        self.refused: list[tuple[Candidate, RequestRefused]] = []
        self.accepted_any = False

    def _hint(self) -> str | None:
        return schema_hint() if self.owner.method == "json_mode" else None

    def _messages(
        self, chunk: Sequence[Candidate], problems: Sequence[str] = ()
    ) -> tuple[list[BaseMessage], ShortIds]:
        return build_messages(
            self.state, chunk, problems=problems, answer_format=self._hint(),
            entries=focus.touched_entries(self.state, chunk, meaning=self.owner.meaning),
        )  # fmt: skip

    def _fixed_tokens(self, shown_for: Sequence[Candidate]) -> int:
        """Tokens of the prompt without candidates, showing the entries ``shown_for`` touch."""
        fixed, _ = build_messages(
            self.state, [], answer_format=self._hint(),
            entries=focus.touched_entries(self.state, shown_for, meaning=self.owner.meaning),
        )  # fmt: skip
        return count_tokens_approximately(fixed)

    def take(self, pending: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
        """The longest prefix of ``pending`` whose prompt fits the budget (at least one).

        The fixed part is counted with the entries all of ``pending`` would be shown: a prefix
        is shown at most as many (:mod:`~worker.consolidation.focus` caps them by the number of
        candidates), close enough for a budget that is an approximation anyway.
        """
        used = self._fixed_tokens(pending)
        for n, cand in enumerate(pending):
            used += count_tokens_approximately([candidate_line(f"C{n + 1}", cand)])
            if used > self.owner.token_budget and n > 0:
                return pending[:n], pending[n:]
        return pending, []

    def oversized(self, cand: Candidate) -> str | None:
        """Why ``cand`` cannot be sent at all: its prompt alone is over the token budget."""
        used = self._fixed_tokens([cand])
        used += count_tokens_approximately([candidate_line("C1", cand)])
        if used <= self.owner.token_budget:
            return None
        return (
            f"set aside: this {cand.kind.value} needs about {used} tokens of prompt, over the "
            f"model's budget of {self.owner.token_budget} (MEMWORKER_MODEL_TOKEN_BUDGET); the "
            "provider would refuse the whole batch"
        )

    def merge_isolated(self, chunk: list[Candidate], *, last: bool) -> None:
        """:meth:`merge_chunk`, halving a chunk the provider refuses until the candidate it
        will not take is alone, which is then set aside (see the module docstring)."""
        try:
            self.merge_chunk(chunk, last=last)
        except RequestRefused as exc:
            if len(chunk) > 1:
                half = len(chunk) // 2
                self.merge_isolated(chunk[:half], last=False)
                self.merge_isolated(chunk[half:], last=last)
                return
            self.refused.append((chunk[0], exc))

    def set_aside_refused(self) -> None:
        """Reject each candidate the provider refused alone, when it took others of the batch;
        when it took none, the refusal is not about a candidate (a wrong model name, a prompt
        it cannot parse): the batch fails as a whole, rejecting nothing."""
        if not self.refused:
            return
        if not self.accepted_any:
            raise self.refused[0][1]
        for cand, exc in self.refused:
            self.ops.append(Reject(candidate_ids=[cand.id], reason=f"set aside: {str(exc)[:300]}"))

    def merge_chunk(self, chunk: list[Candidate], *, last: bool = False) -> None:
        """Ask for the chunk's plan (repaired once) and validate it against the interim state.
        The ``last`` chunk's plan is not applied here: only a later chunk reads the interim
        state, and the whole plan is applied once, by the engine."""
        problems: list[str] = []
        for _attempt in range(ATTEMPTS):
            ops, problems = self._ask(chunk, problems)
            plan = Plan(ops=ops)
            if not problems:
                problems = validate_plan(
                    self.state, chunk, plan,
                    max_removals=self.owner.max_removals - self.removals,
                    max_text_bytes=self.owner.max_text_bytes, meaning=self.owner.meaning,
                )  # fmt: skip
            if not problems:
                self._accept(chunk, plan, advance_state=not last)
                self.accepted_any = True
                return
        raise InvalidModelPlan(
            problems, llm_calls=self.calls, prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
        )  # fmt: skip

    def _accept(self, chunk: list[Candidate], plan: Plan, *, advance_state: bool) -> None:
        self.ops += plan.ops
        self.removals += sum(
            isinstance(op, Supersede | Invalidate) and op.entry_id in self.original
            for op in plan.ops
        )
        if not advance_state:
            return
        applied = apply_plan(
            self.state, chunk, plan, now=self.now, current_files={},
            file_budget_bytes=_NO_BUDGET, sensitive_paths=(),
        )  # fmt: skip
        self.state = advance(self.state, applied)

    def _ask(
        self, chunk: Sequence[Candidate], problems: Sequence[str]
    ) -> tuple[list[Operation], list[str]]:
        """One call (or, when the server rejects the method, one more with the fallback)."""
        while True:
            messages, ids = self._messages(chunk, problems)
            try:
                result = self._invoke(messages)
                break
            except ModelUnavailable:
                raise
            except Exception as exc:  # any provider error or transport failure
                problem = answer_problem(exc)
                if problem is not None:  # the server answered; the answer was unusable
                    self._count_failed(messages, exc)
                    return [], [problem]
                if method_rejected(exc) and self.owner.fall_back(exc):
                    continue
                raise provider_failure(
                    exc, namespace=self.state.namespace, method=self.owner.method
                ) from exc
        raw = result.get("raw") if isinstance(result, dict) else None
        self._count(messages, raw)
        try:  # from the raw answer, strictly: LangChain's parsers complete a cut-off one
            plan = strict_plan(raw)
        except UnusableAnswer as exc:
            return [], [str(exc)]
        return translate(plan, ids)

    def _invoke(self, messages: list[BaseMessage]) -> Any:
        """The structured call, under the consolidator's deadline.

        The call runs in a helper thread (with this context, so callbacks and tracing still
        see it) and is abandoned past the deadline; the provider's own timeout, set from the
        same setting by the loader, then ends its socket.
        """
        structured = self.owner.structured()
        config: Any = {
            "tags": list(CALL_TAGS),
            "metadata": {"namespace": self.state.namespace},
            "run_name": "memworker.consolidate",
        }
        context = contextvars.copy_context()
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memworker-model")
        try:
            future = pool.submit(context.run, structured.invoke, messages, config=config)
            return future.result(timeout=self.owner.timeout_seconds)
        except FutureTimeout:
            if future.done():  # the call itself raised a TimeoutError: the caller wraps it
                raise
            raise deadline_missed(self.state.namespace, self.owner.timeout_seconds) from None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def _count_failed(self, messages: list[BaseMessage], exc: BaseException) -> None:
        """Count a call whose answer raised while parsing, from the usage the error carries."""
        usage = getattr(getattr(exc, "completion", None), "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        self.calls += 1
        if isinstance(prompt, int) and isinstance(completion, int):
            self.prompt_tokens += prompt
            self.completion_tokens += completion
        else:
            self.prompt_tokens += count_tokens_approximately(messages)

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
