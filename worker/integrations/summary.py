"""What summarization compacts away, captured once the summary exists; the chat model that writes
it.

:func:`chat_model_from` builds a chat service's own chat model from one setting (the deep-agent
example's ``DEEP_AGENT_MODEL``): ``provider:model`` (LangChain's ``init_chat_model``) or a class
path ``package.module:Class`` built without arguments. Any failure is one
:class:`~worker.errors.ConfigurationError` line naming the variable, never the library's
multi-line error.

>>> chat_model_from("bogus:model", variable="AGENT_MODEL")
Traceback (most recent call last):
...
worker.errors.ConfigurationError: AGENT_MODEL='bogus:model' could not be built (ValueError: ...

:class:`MemorySummaryFlush` *is* a ``SummarizationMiddleware`` (same arguments, same
behaviour) that, each time a summary replaces old messages, first enqueues those messages as
``turn`` candidates — one per exchange (user input + final reply, tool traffic ignored):

- only after the summary succeeded. A summary that fails — the model raised, or it answered
  nothing but whitespace — changes nothing and enqueues nothing, and the run goes on
  uncompacted (it is tried again on the next model call); the failure is logged and counted
  in ``memworker_summary_failures_total``;
- idempotent on the message ids: each exchange is keyed ``thread:<thread_id>:<message id>``
  (``message:<message id>`` without a thread), the key the capture middleware and the
  thread-scan source use too, so a retried step or a second source adds nothing;
- a queue failure never blocks the compaction (it is logged and counted).

The summary message of an earlier compaction is the model's own digest: never captured, nor
trimmed out of the next summary's input (it and the new messages share
``trim_tokens_to_summarize``).
The summary call is tagged ``middleware:summarize`` (so traces attribute it) and, as LangChain
does, ``nostream`` (its tokens never reach the user's stream).

>>> from langchain.agents import create_agent                        # doctest: +SKIP
>>> agent = create_agent(model, middleware=[MemorySummaryFlush(       # doctest: +SKIP
...     model, enqueuer=client, trigger=("tokens", 4000), keep=("messages", 20))])

Use it in place of ``SummarizationMiddleware``, not beside it. Deep agents bring their own
summarisation (which offloads evicted history to the backend); for them use
:class:`worker.integrations.deepagents.DeepAgentSummaryFlush`, which replaces it by name.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from langchain.agents.middleware import AgentState, SummarizationMiddleware
from langchain.chat_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage, trim_messages
from langchain_core.runnables import Runnable
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from prometheus_client import Counter

from worker.errors import ConfigurationError, IdentityMismatch, first_line
from worker.integrations.capture import (
    AsyncEnqueuer,
    Enqueuer,
    asubmit,
    current_config,
    read_run_ids,
    report_refused,
    submit,
)
from worker.metrics import REGISTRY
from worker.models import EnqueueFields, is_summary, message_id, split_exchanges
from worker.types import MAX_TEXT_BYTES

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


def chat_model_from(spec: str | None, *, variable: str) -> BaseChatModel:
    """The chat model ``spec`` names (see the module); ``variable`` is the setting's name, for
    the error. A spec whose module part has a dot (``package.module:Class``) is a class path."""
    if not spec:
        raise ConfigurationError(
            f"set {variable} to a chat model, e.g. {variable}=openai:gpt-4o-mini (with "
            "OPENAI_API_KEY), or a class as package.module:Class"
        )
    head, _, tail = spec.partition(":")
    try:
        if "." in head:
            built: BaseChatModel = getattr(importlib.import_module(head), tail)()
            return built
        from langchain.chat_models import init_chat_model

        built = init_chat_model(spec)
    except Exception as exc:  # any failure to build the model is the same one line
        raise ConfigurationError(
            f"{variable}={spec!r} could not be built ({type(exc).__name__}: {first_line(exc)}); "
            "give provider:model with its package installed (e.g. `pip install "
            "langchain-openai`) and its credentials set, or a class as package.module:Class"
        ) from None
    return built


logger = logging.getLogger(__name__)

#: Label of this integration in logs and in the capture-error counter.
FLUSH_INTEGRATION = "summary_flush"

#: The tag on every summary call, so traces attribute its tokens to the summarisation step.
SUMMARY_TAG: Final = "middleware:summarize"

#: Summaries that failed (the run went on uncompacted), by integration and reason (``error``:
#: the model raised; ``empty``: it answered only whitespace). A rising count means contexts
#: keep growing and memories from compaction are not being flushed.
SUMMARY_FAILURES = Counter(
    "memworker_summary_failures_total",
    "Summaries that failed; the run went on uncompacted and nothing was flushed.",
    ["integration", "reason"],
    registry=REGISTRY,
)


class EmptySummary(Exception):
    """The summary model answered nothing but whitespace: not a summary."""


class SummaryFailed(Exception):
    """A summary could not be made (the cause is chained); raised only inside the middleware."""


def summary_failed(integration: str, exc: BaseException) -> None:
    """Log and count a failed summary; the run continues uncompacted."""
    cause = exc.__cause__ if isinstance(exc, SummaryFailed) and exc.__cause__ else exc
    reason = "empty" if isinstance(cause, EmptySummary) else "error"
    SUMMARY_FAILURES.labels(integration=integration, reason=reason).inc()
    logger.warning(
        "summary failed (%s: %s); the run goes on uncompacted and nothing is flushed",
        reason,
        type(cause).__name__,
    )


def checked_summary(summary: str) -> str:
    """``summary``, unless it is empty or whitespace (:class:`EmptySummary`)."""
    if not summary.strip():
        raise EmptySummary("the summary model returned an empty summary")
    return summary


def tag_summary_calls(middleware: Any) -> None:
    """Tag the summary model (and a custom summarizer) of a LangChain summarisation helper."""
    middleware._summary_model = middleware._summary_model.with_config(tags=[SUMMARY_TAG])
    if isinstance(middleware.summarizer, Runnable):
        middleware.summarizer = middleware.summarizer.with_config(tags=[SUMMARY_TAG])


class CheckedSummaries:
    """Mixin for a summarisation middleware (put it first among the bases): an empty summary or
    a failing summary model becomes :class:`SummaryFailed`, which the middleware turns into
    "nothing changed" instead of a failed run."""

    def _create_summary(self, messages_to_summarize: list[AnyMessage]) -> str:
        try:
            # The middleware base comes after this mixin in the MRO; mypy cannot see it here.
            return checked_summary(super()._create_summary(messages_to_summarize))  # type: ignore[misc]
        except Exception as exc:
            raise SummaryFailed(str(exc)) from exc

    async def _acreate_summary(self, messages_to_summarize: list[AnyMessage]) -> str:
        try:
            made = await super()._acreate_summary(messages_to_summarize)  # type: ignore[misc]
            return checked_summary(made)
        except Exception as exc:
            raise SummaryFailed(str(exc)) from exc


class MemorySummaryFlush(CheckedSummaries, SummarizationMiddleware[Any, Any]):
    """``SummarizationMiddleware`` that enqueues the compacted messages after a good summary.

    Args:
        model: as for ``SummarizationMiddleware``.
        enqueuer: the hot-path client (sync or async; see :mod:`worker.integrations.capture`).
        user_key: the key naming the user in the run's context, ``configurable`` or metadata.
        assistant_id: the per-assistant user namespace, as in the capture middleware.
        max_text_bytes: each exchange's text is shortened to this many bytes.
        **summarization: every other ``SummarizationMiddleware`` argument (``trigger``,
            ``keep``, ``summary_prompt``, ``summarizer``, …).
    """

    def __init__(
        self,
        model: str | BaseChatModel,
        *,
        enqueuer: Enqueuer | AsyncEnqueuer,
        user_key: str = "user_id",
        assistant_id: str | None = None,
        max_text_bytes: int = MAX_TEXT_BYTES,
        **summarization: Any,
    ) -> None:
        super().__init__(model, **summarization)
        tag_summary_calls(self)
        self.enqueuer = enqueuer
        self.user_key = user_key
        self.assistant_id = assistant_id
        self.max_text_bytes = max_text_bytes

    def _trim_messages_for_summary(self, messages: list[AnyMessage]) -> list[AnyMessage]:
        """Trim as LangChain does, but never drop the previous summary: it and the new messages
        share the budget (the summary's tokens come off it first), so a compaction never
        forgets what an earlier one kept."""
        if not messages or not is_summary(messages[0]) or self.trim_tokens_to_summarize is None:
            return super()._trim_messages_for_summary(messages)
        previous, rest = messages[0], messages[1:]
        left = self.trim_tokens_to_summarize - int(self.token_counter([previous]))
        if left <= 0:
            return [previous]
        # The same trim LangChain applies (the newest messages first), on what is left.
        trimmed: list[AnyMessage] = trim_messages(  # type: ignore[assignment]  # same types back
            rest,
            max_tokens=left,
            token_counter=self.token_counter,
            start_on="human",
            strategy="last",
            allow_partial=True,
            include_system=True,
        )
        return [previous, *trimmed]

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        before = list(state["messages"])
        try:
            update = super().before_model(state, runtime)
        except GraphBubbleUp:
            raise
        except SummaryFailed as exc:
            summary_failed(FLUSH_INTEGRATION, exc)
            return None  # nothing removed: the run goes on uncompacted
        for args in self._candidates(before, update, runtime):
            submit(self.enqueuer, FLUSH_INTEGRATION, **args)
        return update

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        before = list(state["messages"])
        try:
            update = await super().abefore_model(state, runtime)
        except GraphBubbleUp:
            raise
        except SummaryFailed as exc:
            summary_failed(FLUSH_INTEGRATION, exc)
            return None
        for args in self._candidates(before, update, runtime):
            await asubmit(self.enqueuer, FLUSH_INTEGRATION, **args)
        return update

    def _candidates(
        self,
        before: Sequence[AnyMessage],
        update: dict[str, Any] | None,
        runtime: Runtime[Any],
    ) -> list[EnqueueFields]:
        """One ``turn`` per exchange among the messages the update compacts away."""
        if not update:
            return []
        removed = compacted_messages(before, update.get("messages") or [])
        return flush_args(
            removed,
            runtime,
            user_key=self.user_key,
            assistant_id=self.assistant_id,
            max_text_bytes=self.max_text_bytes,
        )


def flush_args(
    removed: Sequence[BaseMessage],
    runtime: Any,
    *,
    user_key: str,
    assistant_id: str | None,
    max_text_bytes: int,
    integration: str = FLUSH_INTEGRATION,
) -> list[EnqueueFields]:
    """One ``turn`` per exchange among compacted messages, keyed as the capture keys them
    (none, counted under ``integration``, when the run names another user than the
    authenticated one)."""
    exchanges = [
        x for x in split_exchanges(removed) if x.anchor_id and (x.user_text or x.reply_text)
    ]
    if not exchanges:
        return []
    try:
        ids = read_run_ids(runtime, current_config(), user_key=user_key)
    except IdentityMismatch as exc:  # another user's memory: refused, counted, run goes on
        report_refused(integration, exc)
        return []
    out: list[EnqueueFields] = []
    for exchange in exchanges:
        key = (
            exchange.idempotency_key(ids.thread_id)
            if ids.thread_id
            else f"message:{exchange.anchor_id}"
        )
        out.append(
            EnqueueFields(
                user_id=ids.user_id,
                trace_id=ids.trace_id,
                text=exchange.render(max_text_bytes),
                kind="turn",
                assistant_id=assistant_id,
                thread_id=ids.thread_id,
                idempotency_key=key,
                source="summary_flush",
                org_id=ids.org_id,
            )
        )
    return out


def compacted_messages(
    before: Sequence[BaseMessage], written: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The messages of ``before`` that a ``REMOVE_ALL_MESSAGES`` update does not write back.

    ``SummarizationMiddleware`` answers with ``[RemoveMessage(REMOVE_ALL), summary, *kept]``;
    what it removed is everything not among the kept messages (matched by id, which it
    assigns before cutting).

    >>> from langchain_core.messages import HumanMessage
    >>> a, b = HumanMessage("a", id="1"), HumanMessage("b", id="2")
    >>> [m.id for m in compacted_messages([a, b], [RemoveMessage(id="__remove_all__"), b])]
    ['1']
    """
    kept = {message_id(m) for m in written if not isinstance(m, RemoveMessage)}
    return [m for m in before if message_id(m) not in kept]
