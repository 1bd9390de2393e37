"""Capture what LangChain's ``SummarizationMiddleware`` compacts away, once the summary exists.

:class:`MemorySummaryFlush` *is* a ``SummarizationMiddleware`` (same arguments, same
behaviour) that, each time a summary replaces old messages, first enqueues those messages as
``turn`` candidates — one per exchange (user input + final reply, tool traffic ignored):

- only after the summary succeeded: a failed summary raises exactly as before, changes nothing
  and enqueues nothing;
- idempotent on the message ids: each exchange is keyed ``thread:<thread_id>:<message id>``
  (``message:<message id>`` without a thread), the key the capture middleware and the
  thread-scan source use too, so a retried step or a second source adds nothing;
- a queue failure never blocks the compaction (it is logged and counted).

The summary message of an earlier compaction is the model's own digest and is never captured.

>>> from langchain.agents import create_agent                        # doctest: +SKIP
>>> agent = create_agent(model, middleware=[MemorySummaryFlush(       # doctest: +SKIP
...     model, enqueuer=client, trigger=("tokens", 4000), keep=("messages", 20))])

Use it in place of ``SummarizationMiddleware``, not beside it. Deep agents bring their own
summarisation (which offloads evicted history to the backend); this class covers LangChain's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import AgentState, SummarizationMiddleware
from langchain.chat_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, RemoveMessage
from langgraph.runtime import Runtime

from worker.integrations.enqueuer import AsyncEnqueuer, EnqueueArgs, Enqueuer, asubmit, submit
from worker.integrations.exchanges import DEFAULT_MAX_TEXT_BYTES, message_id, split_exchanges
from worker.integrations.run_context import current_config, read_run_ids

#: Label of this integration in logs and in the capture-error counter.
FLUSH_INTEGRATION = "summary_flush"


class MemorySummaryFlush(SummarizationMiddleware[Any, Any]):
    """``SummarizationMiddleware`` that enqueues the compacted messages after a good summary.

    Args:
        model: as for ``SummarizationMiddleware``.
        enqueuer: the hot-path client (sync or async; see :mod:`worker.integrations.enqueuer`).
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
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
        **summarization: Any,
    ) -> None:
        super().__init__(model, **summarization)
        self.enqueuer = enqueuer
        self.user_key = user_key
        self.assistant_id = assistant_id
        self.max_text_bytes = max_text_bytes

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        before = list(state["messages"])
        update = super().before_model(state, runtime)  # a failed summary raises here
        for args in self._candidates(before, update, runtime):
            submit(self.enqueuer, FLUSH_INTEGRATION, **args)
        return update

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        before = list(state["messages"])
        update = await super().abefore_model(state, runtime)  # a failed summary raises here
        for args in self._candidates(before, update, runtime):
            await asubmit(self.enqueuer, FLUSH_INTEGRATION, **args)
        return update

    def _candidates(
        self,
        before: Sequence[AnyMessage],
        update: dict[str, Any] | None,
        runtime: Runtime[Any],
    ) -> list[EnqueueArgs]:
        """One ``turn`` per exchange among the messages the update compacts away."""
        if not update:
            return []
        removed = compacted_messages(before, update.get("messages") or [])
        exchanges = [
            x for x in split_exchanges(removed) if x.anchor_id and (x.user_text or x.reply_text)
        ]
        if not exchanges:
            return []
        ids = read_run_ids(runtime, current_config(), user_key=self.user_key)
        out: list[EnqueueArgs] = []
        for exchange in exchanges:
            key = (
                exchange.idempotency_key(ids.thread_id)
                if ids.thread_id
                else f"message:{exchange.anchor_id}"
            )
            out.append(
                EnqueueArgs(
                    user_id=ids.user_id,
                    trace_id=ids.trace_id,
                    text=exchange.render(self.max_text_bytes),
                    kind="turn",
                    assistant_id=self.assistant_id,
                    thread_id=ids.thread_id,
                    idempotency_key=key,
                    source="summary_flush",
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
