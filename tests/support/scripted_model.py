"""A scripted LangChain chat model: the one test double, standing in for paid LLM APIs.

It answers from a queue of scripted replies (an ``AIMessage``, a plan given as a dict of tool
arguments, or an exception to raise), or from a ``responder`` function of the prompt; it records
every prompt with its tags and metadata, and reports ``usage_metadata`` (the scripted one, or
``count_tokens_approximately`` of prompt and reply) like a real provider. ``bind_tools`` makes
``with_structured_output`` work as it does for tool-calling providers; :class:`JsonTextModel`
answers the JSON-text methods the way providers' integrations parse them.

>>> from langchain_core.messages import HumanMessage
>>> model = ScriptedChatModel(replies=[AIMessage("hi")])
>>> model.invoke([HumanMessage("hello")]).content
'hi'
>>> model.prompts[0][0].content
'hello'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.output_parsers import PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

#: The tool name ``with_structured_output(ConsolidationPlan)`` binds.
PLAN_TOOL = "ConsolidationPlan"

Reply = AIMessage | dict[str, Any] | BaseException


def plan_reply(ops: list[dict[str, Any]], *, call_id: str = "call_1") -> AIMessage:
    """A tool call answering with ``ops`` (dicts over short ids, as the model would write them)."""
    return AIMessage(
        content="", tool_calls=[{"name": PLAN_TOOL, "args": {"ops": ops}, "id": call_id}]
    )


class ScriptedChatModel(BaseChatModel):
    """Replies from ``replies`` in order (or from ``responder``); records what it was asked."""

    replies: list[Any] = Field(default_factory=list)  #: of Reply; Any: pydantic must not coerce
    responder: Callable[[list[BaseMessage]], AIMessage] | None = None
    prompts: list[list[BaseMessage]] = Field(default_factory=list)
    calls: list[dict[str, Any]] = Field(default_factory=list)  #: tags, metadata, tools per call
    report_usage: bool = True  #: False: like a provider that sends no usage_metadata

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(list(messages))
        self.calls.append(
            {
                "tags": list(run_manager.tags) if run_manager else [],
                "metadata": dict(run_manager.metadata) if run_manager else {},
                "tools": [t["function"]["name"] for t in kwargs.get("tools") or []],
            }
        )
        if self.responder is not None:
            reply: Reply = self.responder(list(messages))
        elif self.replies:
            reply = self.replies.pop(0)
        else:
            raise AssertionError("ScriptedChatModel ran out of scripted replies")
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, dict):
            reply = plan_reply(reply["ops"])
        if reply.usage_metadata is None and self.report_usage:
            prompt_tokens = count_tokens_approximately(messages)
            completion = count_tokens_approximately([reply])
            reply = reply.model_copy(
                update={
                    "usage_metadata": {
                        "input_tokens": prompt_tokens,
                        "output_tokens": completion,
                        "total_tokens": prompt_tokens + completion,
                    }
                }
            )
        return ChatResult(generations=[ChatGeneration(message=reply)])


class JsonTextModel(ScriptedChatModel):
    """A scripted model whose ``json_mode``/``json_schema`` answers are JSON text in the reply's
    content, parsed by LangChain's ``PydanticOutputParser`` exactly as ``ChatAnthropic``
    (``json_schema``) and ``ChatOpenAI`` (``json_mode``) chain it; ``function_calling`` stays a
    tool call."""

    def with_structured_output(  # type: ignore[override]
        self, schema: Any, *, include_raw: bool = False, method: str = "function_calling"
    ) -> Runnable[Any, Any]:
        if method == "function_calling":
            return super().with_structured_output(schema, include_raw=include_raw)
        parser: PydanticOutputParser[Any] = PydanticOutputParser(pydantic_object=schema)
        if not include_raw:
            return self | parser
        parsed = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        ).with_fallbacks(
            [RunnablePassthrough.assign(parsed=lambda _: None)], exception_key="parsing_error"
        )
        return RunnableMap(raw=self) | parsed
