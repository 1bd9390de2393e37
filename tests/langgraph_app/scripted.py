"""Scripted chat models: the only test double (the machine is offline and LLM APIs are paid).

``QueuedChatModel`` answers with queued ``AIMessage``s in order. ``RuleChatModel`` answers by
a fixed rule, so a long-lived server process can serve many tests:

- "weather in <city>" from the user → a ``get_weather`` tool call;
- a tool result → "The forecast: <result>";
- anything else → "echo: <last user text>".

Both record every prompt they were given in ``prompts``; ``RuleChatModel`` also puts the
system prompt it saw into ``response_metadata["system_prompt"]``, so a test can read it from a
served thread's state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

_WEATHER = re.compile(r"weather in (\w+)", re.IGNORECASE)


class _Recording(BaseChatModel):
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _result(self, message: AIMessage) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=message)])


class QueuedChatModel(_Recording):
    """Returns the queued responses in order; raises when it runs out."""

    #: AIMessages to return, or exceptions to raise, in order.
    responses: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "queued-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        if not self.responses:
            raise AssertionError("QueuedChatModel ran out of responses")
        nxt = self.responses.pop(0)
        if isinstance(nxt, Exception):
            raise nxt
        return self._result(nxt.model_copy())


class RuleChatModel(_Recording):
    """Answers by the rule in the module docstring."""

    @property
    def _llm_type(self) -> str:
        return "rule-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return self._result(AIMessage(f"The forecast: {last.text}"))
        user = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        text = user.text if user else ""
        match = _WEATHER.search(text)
        if match and isinstance(last, HumanMessage):
            call = {"name": "get_weather", "args": {"city": match.group(1)}, "id": "call-weather"}
            return self._result(AIMessage("", tool_calls=[call]))
        return self._result(AIMessage(f"echo: {text}", response_metadata={"system_prompt": system}))


class ToolCallChatModel(_Recording):
    """Emits the tool call the user's message scripts, then reports the tool's answer.

    - a user message ``call <tool> <json arguments>`` → that one tool call;
    - a tool result → ``tool said: <result>`` (the test reads the outcome from the thread);
    - anything else → ``echo: <last user text>``, with the system prompt in its metadata.
    """

    @property
    def _llm_type(self) -> str:
        return "tool-call-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        import json

        self.prompts.append(list(messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return self._result(AIMessage(f"tool said: {last.text}"))
        system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        text = last.text if isinstance(last, HumanMessage) else ""
        if text.startswith("call "):
            _, name, args = text.split(" ", 2)
            call = {"name": name, "args": json.loads(args), "id": f"call-{len(self.prompts)}"}
            return self._result(AIMessage("", tool_calls=[call]))
        return self._result(AIMessage(f"echo: {text}", response_metadata={"system_prompt": system}))
