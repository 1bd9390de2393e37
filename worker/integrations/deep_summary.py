"""The summary flush for deep agents: replaces deepagents' own ``SummarizationMiddleware``.

``create_deep_agent`` always installs deepagents' summarisation (it offloads evicted history to
the backend and keeps the raw messages, recording a ``_summarization_event``). A middleware
passed in ``middleware=[...]`` replaces a built-in one **by name**, so
:class:`DeepAgentSummaryFlush` — deepagents' class, named ``SummarizationMiddleware`` — takes
its place instead of running beside it::

    from deepagents import create_deep_agent
    from deepagents.backends import StateBackend
    from worker.integrations.deep_summary import DeepAgentSummaryFlush

    backend = StateBackend()
    agent = create_deep_agent(model=model, backend=backend, middleware=[
        DeepAgentSummaryFlush(model, backend=backend, enqueuer=client, trigger=("tokens", 4000))])

After a compaction the model call succeeded with, the messages it compacted away (those between
the previous event's cutoff and the new one) are enqueued as ``turn`` candidates, keyed like the
capture middleware's. A summary that fails (the model raised, or answered only whitespace)
changes nothing and enqueues nothing: the model is called on the uncompacted context, and the
failure is logged and counted (``memworker_summary_failures_total``). Summary calls are tagged
``middleware:summarize`` and ``nostream``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from deepagents.middleware.summarization import (
    SUMMARIZATION_EVENT_KEY,
    SummarizationMiddleware,
)
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse

from worker.constants import MAX_TEXT_BYTES
from worker.integrations.enqueuer import AsyncEnqueuer, Enqueuer, asubmit, submit
from worker.integrations.summary_flush import (
    CheckedSummaries,
    SummaryFailed,
    flush_args,
    summary_failed,
    tag_summary_calls,
)
from worker.models import EnqueueFields

#: Label of this integration in logs and counters.
DEEP_FLUSH_INTEGRATION = "deep_summary_flush"


class DeepAgentSummaryFlush(CheckedSummaries, SummarizationMiddleware):
    """deepagents' ``SummarizationMiddleware`` that flushes what it compacts (module docstring).

    Args:
        model, backend, **summarization: as for deepagents' ``SummarizationMiddleware``.
        enqueuer: the hot-path client (sync or async).
        user_key: the key naming the user in the run's context, ``configurable`` or metadata.
        assistant_id: the per-assistant user namespace, as in the capture middleware.
        max_text_bytes: each exchange's text is shortened to this many bytes.
    """

    def __init__(
        self,
        model: Any,
        *,
        backend: Any,
        enqueuer: Enqueuer | AsyncEnqueuer,
        user_key: str = "user_id",
        assistant_id: str | None = None,
        max_text_bytes: int = MAX_TEXT_BYTES,
        **summarization: Any,
    ) -> None:
        super().__init__(model, backend=backend, **summarization)
        tag_summary_calls(self._lc_helper)
        self.enqueuer = enqueuer
        self.user_key = user_key
        self.assistant_id = assistant_id
        self.max_text_bytes = max_text_bytes

    @property
    def name(self) -> str:
        """The built-in's name, so ``create_deep_agent`` replaces it with this one."""
        return "SummarizationMiddleware"

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        try:
            response = super().wrap_model_call(request, handler)
        except SummaryFailed as exc:
            summary_failed(DEEP_FLUSH_INTEGRATION, exc)
            return handler(request.override(messages=self._get_effective_messages(request)))
        for args in self._compacted(request, response):
            submit(self.enqueuer, DEEP_FLUSH_INTEGRATION, **args)
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> Any:
        try:
            response = await super().awrap_model_call(request, handler)
        except SummaryFailed as exc:
            summary_failed(DEEP_FLUSH_INTEGRATION, exc)
            return await handler(request.override(messages=self._get_effective_messages(request)))
        for args in self._compacted(request, response):
            await asubmit(self.enqueuer, DEEP_FLUSH_INTEGRATION, **args)
        return response

    def _compacted(self, request: ModelRequest, response: Any) -> list[EnqueueFields]:
        """The candidates of the messages a new summarisation event compacted away."""
        if not isinstance(response, ExtendedModelResponse) or response.command is None:
            return []
        update = response.command.update
        event = update.get(SUMMARIZATION_EVENT_KEY) if isinstance(update, Mapping) else None
        if not isinstance(event, Mapping):
            return []
        previous = request.state.get(SUMMARIZATION_EVENT_KEY)
        start = int(previous["cutoff_index"]) if isinstance(previous, Mapping) else 0
        messages = list(request.state.get("messages") or [])
        removed = messages[start : int(event["cutoff_index"])]
        return flush_args(
            removed,
            request.runtime,
            user_key=self.user_key,
            assistant_id=self.assistant_id,
            max_text_bytes=self.max_text_bytes,
            integration=DEEP_FLUSH_INTEGRATION,
        )
