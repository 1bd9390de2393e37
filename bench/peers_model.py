"""The recording scripted model every system of the LLM economy bench talks to, and its replies.

:class:`RecordingModel` is the tests' :class:`~tests.support.scripted_model.ScriptedChatModel`
that also counts the tool schemas bound to a call: each call's prompt tokens are
``count_tokens_approximately`` of its messages *and* of the JSON of its tools, recorded in
``tokens`` and reported as the call's ``usage_metadata`` (so memworker's own plan counts the
same figure).

The replies follow one policy for every system, written in the answer format each expects:
*add every fact shown as new, unless its exact text is already among the memories the call
was shown* (then memworker's plan confirms that entry; the peers add nothing). So memory counts
grow with the stream, and a duplicate can only come from a system not showing the model an
entry it already holds.
"""

from __future__ import annotations

import html
import json
import re
import threading
import uuid
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from tests.support.scripted_model import ScriptedChatModel, plan_reply
from worker.types import FACTS_PATH


class RecordingModel(ScriptedChatModel):
    """A scripted model whose usage counts messages and bound tool schemas."""

    tokens: list[int] = Field(default_factory=list)  #: prompt tokens of each call, in order

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        prompt = count_tokens_approximately(messages, tools=kwargs.get("tools") or None)
        reply = result.generations[0].message
        assert isinstance(reply, AIMessage)
        completion = count_tokens_approximately([reply])
        usage = {"input_tokens": prompt, "output_tokens": completion,
                 "total_tokens": prompt + completion}  # fmt: skip
        with _LOCK:
            self.tokens.append(prompt)
        return ChatResult(
            generations=[ChatGeneration(message=reply.model_copy(update={"usage_metadata": usage}))]
        )


_LOCK = threading.Lock()


def memworker_reply(messages: list[BaseMessage]) -> AIMessage:
    """memworker's plan: one add per distinct new text, a confirm for a text already held."""
    data = str(messages[1].content)
    held = {
        html.unescape(text): short
        for short, text in re.findall(r'<entry id="(E\d+)"[^>]*>(.*?)</entry>', data)
    }
    by_text: dict[str, list[str]] = {}
    for short, text in re.findall(r'<candidate id="(C\d+)"[^>]*>(.*?)</candidate>', data):
        by_text.setdefault(html.unescape(text), []).append(short)
    ops: list[dict[str, Any]] = []
    for text, shorts in by_text.items():
        if text in held:
            ops.append({"op": "confirm", "candidates": shorts, "entry": held[text]})
        else:
            ops.append({"op": "add", "candidates": shorts, "path": FACTS_PATH, "text": text})
    return plan_reply(ops)


def mem0_reply(messages: list[BaseMessage]) -> AIMessage:
    """mem0's additive extraction answer: ``{"memory": [{"text": …}]}`` for each new fact."""
    data = str(messages[-1].content)
    existing = _section(data, "Existing Memories")
    held = {m["text"] for m in json.loads(existing)} if existing.startswith("[") else set()
    new = [
        line.removeprefix("user: ")
        for line in _section(data, "New Messages").splitlines()
        if line.startswith("user: ")
    ]
    facts = [{"text": t} for t in dict.fromkeys(new) if t not in held]
    return AIMessage(json.dumps({"memory": facts}))


def _section(prompt: str, title: str) -> str:
    found = re.search(rf"## {title}\n(.*?)(?:\n\n## |\n\n# Output|\Z)", prompt, re.S)
    return found.group(1).strip() if found else ""


def langmem_reply(messages: list[BaseMessage]) -> AIMessage:
    """langmem's answer: one ``Memory`` tool call per new fact of the conversation shown."""
    existing = str(messages[0].content)
    convo = str(messages[-1].content)
    facts = re.findall(r"=+ Human Message =+\n\n(.*?)\n(?:</session_|=+ )", convo, re.S)
    calls = [
        {"name": "Memory", "args": {"content": text}, "id": f"call_{uuid.uuid4().hex[:8]}"}
        for text in dict.fromkeys(f.strip() for f in facts)
        if repr(text) not in existing
    ]
    return AIMessage(content="", tool_calls=calls)
