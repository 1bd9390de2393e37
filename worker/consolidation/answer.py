"""The model's answer: a plan over the short ids its prompt showed, and its translation back.

The prompt names entries ``E1, E2, …`` and candidates ``C1, C2, …`` (fewer tokens, and no real
id to copy wrong); :func:`translate` maps the answer back and lists what it cannot map as
problems for the repair call.

**Read strictly.** :func:`strict_plan` reads the plan from the model's raw message, never from
what LangChain's parsers made of it: those complete a cut-off answer (``parse_json_markdown``
closes an open string and every open bracket, and a streamed tool call's arguments are parsed
the same way), so ``{"ops":[{"op":"add","candidates":["C1"],"text":"I pre`` would become a
plan adding ``I pre``. Here an answer is a plan only when the provider says it ended normally
(no length limit, no content filter), its JSON is complete and nothing else, and it matches the
schema as it stands; anything else is an :class:`UnusableAnswer`, a failed call (repaired once,
then the batch fails and is retried, then dead-lettered with the reason).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Literal

from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field, ValidationError

from worker.consolidation.prompt import ShortIds
from worker.consolidation.types import Add, Confirm, Invalidate, Operation, Reject, Supersede
from worker.constants import FACTS_PATH


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


#: Keys of ``response_metadata`` under which providers say why the answer ended: OpenAI,
#: Mistral, Google (``finish_reason``), Anthropic (``stop_reason``), Ollama (``done_reason``).
_END_KEYS: Final = ("finish_reason", "stop_reason", "done_reason")

#: Ends (lower-cased) that mean the answer was cut at a token limit: whatever JSON it holds
#: may be a prefix that merely happens to parse, so it is never used.
_CUT_OFF: Final = frozenset({"length", "max_tokens", "model_context_window_exceeded"})

#: Ends (lower-cased) that mean a filter stopped or replaced the answer.
_FILTERED: Final = frozenset({"content_filter", "refusal", "safety", "recitation"})

#: A JSON answer wrapped in one Markdown code fence, as chat models often write it; the closing
#: fence must be there (an unclosed fence is an answer cut off).
_FENCED: Final = re.compile(r"```(?:json)?[ \t]*\n(.*)\n[ \t]*```", re.DOTALL)

#: Characters of a parser's message shown to the repair call (enough to locate the fault).
_DETAIL_CHARS: Final = 300

#: The instruction closing every problem about the answer's form.
_ANSWER_AGAIN: Final = "answer with one complete ConsolidationPlan holding all operations"


class UnusableAnswer(ValueError):
    """The model's answer is not one complete, schema-valid plan; the message is the problem
    shown to the repair call."""


def strict_plan(raw: object) -> ConsolidationPlan:
    """The plan the raw answer ``raw`` holds, read strictly (see the module docstring).

    Raises :class:`UnusableAnswer` naming what is wrong.

    >>> done = {"finish_reason": "stop"}
    >>> strict_plan(AIMessage('{"ops": []}', response_metadata=done)).ops
    []
    >>> def problem(text, **ended):
    ...     try:
    ...         strict_plan(AIMessage(text, response_metadata=ended or done))
    ...     except UnusableAnswer as exc:
    ...         return str(exc)[:72]
    >>> problem('{"ops": [{"op": "add", "candidates": ["C1"], "text": "I pre')
    'the answer did not match the ConsolidationPlan schema: it is not one com'
    >>> problem('{"ops": []}', stop_reason="max_tokens")
    "the answer was cut off at its length limit (stop_reason 'max_tokens') be"
    """
    if not isinstance(raw, AIMessage):
        raise UnusableAnswer(
            f"the call returned no answer message ({type(raw).__name__}); {_ANSWER_AGAIN}"
        )
    _check_ending(raw)
    data = _tool_arguments(raw) if raw.tool_calls or raw.invalid_tool_calls else _json_text(raw)
    try:
        return ConsolidationPlan.model_validate(data, strict=True)
    except ValidationError as exc:
        raise UnusableAnswer(_schema_problem(str(exc))) from None


def _schema_problem(detail: str) -> str:
    return (
        f"the answer did not match the ConsolidationPlan schema: {detail[:_DETAIL_CHARS]}; "
        + _ANSWER_AGAIN
    )


def _check_ending(raw: AIMessage) -> None:
    """Refuse an answer its provider says was cut off or filtered, however it parses."""
    for key in _END_KEYS:
        ended = raw.response_metadata.get(key)
        if not isinstance(ended, str):
            continue
        if ended.lower() in _CUT_OFF:
            raise UnusableAnswer(
                f"the answer was cut off at its length limit ({key} {ended!r}) before the plan "
                "was complete; answer with one short ConsolidationPlan: one operation per "
                "candidate, short texts"
            )
        if ended.lower() in _FILTERED:
            raise UnusableAnswer(
                f"the answer was stopped by a filter ({key} {ended!r}); {_ANSWER_AGAIN}"
            )


def _tool_arguments(raw: AIMessage) -> Any:
    """The arguments of the answer's one plan tool call, from the provider's own text of them
    where the message keeps it (OpenAI's ``additional_kwargs``, a stream's chunks): LangChain
    parses a streamed call's arguments leniently, completing a cut-off one."""
    if raw.invalid_tool_calls:
        bad = raw.invalid_tool_calls[0]
        raise UnusableAnswer(
            _schema_problem(f"the tool call's arguments are not valid JSON: {bad.get('error')}")
        )
    calls = raw.tool_calls
    name = ConsolidationPlan.__name__
    if len(calls) != 1 or calls[0]["name"] != name:
        called = ", ".join(call["name"] for call in calls)
        raise UnusableAnswer(_schema_problem(f"expected one {name} call, got: {called}"))
    text = _provider_arguments(raw, calls[0].get("id"))
    if text is None:
        return calls[0]["args"]
    return _loads(text)


def _provider_arguments(raw: AIMessage, call_id: str | None) -> str | None:
    """The provider's own text of the arguments of call ``call_id``, when the message has it."""
    chunks = getattr(raw, "tool_call_chunks", None) or []
    if chunks:
        args = chunks[0].get("args")
        return args if isinstance(args, str) else None
    for call in raw.additional_kwargs.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and call.get("id") == call_id:
            args = function.get("arguments")
            return args if isinstance(args, str) else None
    return None


def _json_text(raw: AIMessage) -> Any:
    """The JSON object that is the whole text of the answer (in one closed code fence or none)."""
    body = raw.text.strip()
    if body.startswith("```"):
        fenced = _FENCED.fullmatch(body)
        if fenced is None:
            raise UnusableAnswer(_schema_problem("its code fence is not closed (cut off?)"))
        body = fenced.group(1)
    return _loads(body)


def _loads(text: str) -> Any:
    """``text`` as JSON, all of it and nothing filled in (control characters inside strings are
    accepted, as the providers' own parsers accept them)."""
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError as exc:
        raise UnusableAnswer(
            _schema_problem(f"it is not one complete JSON object ({exc})")
        ) from None


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


def schema_hint() -> str:
    """The answer format for ``json_mode``, where the server checks only that it is JSON."""
    schema = json.dumps(ConsolidationPlan.model_json_schema(), separators=(",", ":"))
    return "Answer with one JSON object, nothing else, that matches this JSON schema:\n" + schema
