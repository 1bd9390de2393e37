"""Turn a chat transcript into *exchanges*: a user's input paired with the final reply.

The capture middleware, the summarisation flush and the thread-scan source all cut a message
list the same way, so the same exchange gets the same idempotency key whichever of them sees it
first (``thread:<thread_id>:<message id>``), and the candidate ledger keeps only one.

Rules:

- a human message starts an exchange; consecutive human messages belong to the same one;
- AI messages that call tools, and tool results, are tool traffic and never appear in the text;
- the *final reply* is the last AI message of the exchange with text and without tool calls;
  an exchange whose last AI message still calls tools (or that has no AI message yet) is
  incomplete;
- system messages and the summary message that ``SummarizationMiddleware`` inserts are not
  user input and are skipped.

Messages may be LangChain message objects or the JSON dicts the LangGraph SDK returns.

>>> from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
>>> msgs = [
...     HumanMessage("Weather in Paris?", id="h1"),
...     AIMessage("", id="a1", tool_calls=[{"name": "w", "args": {}, "id": "c1"}]),
...     ToolMessage("sunny", tool_call_id="c1", id="t1"),
...     AIMessage("It is sunny.", id="a2"),
... ]
>>> [x.render() for x in split_exchanges(msgs)]
['user: Weather in Paris?\\nassistant: It is sunny.']
>>> split_exchanges(msgs)[0].anchor_id
'a2'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from worker.constants import MAX_TEXT_BYTES

#: The marker ``SummarizationMiddleware`` puts on the summary it inserts; that message is the
#: model's own digest, not something the user said.
SUMMARY_MARKER = "summarization"


_ROLE_ALIASES = {"user": "human", "assistant": "ai", "developer": "system"}
_ELLIPSIS = "…"


@dataclass(frozen=True)
class Exchange:
    """One user input and the final reply to it (either may be missing)."""

    user_text: str | None
    user_message_id: str | None
    reply_text: str | None
    reply_message_id: str | None
    #: Ids of every message of the exchange, tool traffic included, in order.
    message_ids: tuple[str, ...] = field(default=())

    @property
    def complete(self) -> bool:
        """True when the exchange ends in a final assistant reply."""
        return self.reply_text is not None

    @property
    def anchor_id(self) -> str | None:
        """The message id the exchange is keyed on: the final reply's, else the user input's."""
        return self.reply_message_id or self.user_message_id

    @property
    def last_message_id(self) -> str | None:
        """Id of the exchange's last message; a thread cursor advances to it."""
        return self.message_ids[-1] if self.message_ids else None

    def idempotency_key(self, thread_id: str) -> str | None:
        """``thread:<thread_id>:<anchor id>``, or ``None`` when no message carries an id."""
        anchor = self.anchor_id
        return f"thread:{thread_id}:{anchor}" if anchor else None

    def render(self, max_bytes: int = MAX_TEXT_BYTES) -> str:
        """``user: …`` and ``assistant: …`` lines, shortened to fit ``max_bytes``."""
        parts = [
            (label, text)
            for label, text in (("user", self.user_text), ("assistant", self.reply_text))
            if text
        ]
        if not parts:
            return ""
        share = max(1, max_bytes // len(parts) - len("assistant: \n"))
        return "\n".join(f"{label}: {_truncate(text, share)}" for label, text in parts)


def role_of(message: BaseMessage | Mapping[str, Any]) -> str:
    """``human``, ``ai``, ``tool``, ``system`` (or the raw type) of a message object or dict."""
    if isinstance(message, BaseMessage):
        raw = message.type
    else:
        raw = str(message.get("type") or message.get("role") or "")
    return _ROLE_ALIASES.get(raw, raw)


def message_id(message: BaseMessage | Mapping[str, Any]) -> str | None:
    """The message's id, if it has one."""
    value = message.id if isinstance(message, BaseMessage) else message.get("id")
    return str(value) if value else None


def text_of(message: BaseMessage | Mapping[str, Any]) -> str:
    """The plain text of a message: string content, or the ``text`` blocks of a list."""
    content = message.content if isinstance(message, BaseMessage) else message.get("content")
    if isinstance(content, str):
        return content.strip()
    pieces: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                pieces.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                pieces.append(str(block.get("text", "")))
    return "".join(pieces).strip()


def has_tool_calls(message: BaseMessage | Mapping[str, Any]) -> bool:
    """True when an AI message asks for tool calls."""
    calls = (
        getattr(message, "tool_calls", None)
        if isinstance(message, BaseMessage)
        else message.get("tool_calls")
    )
    return bool(calls)


def is_summary(message: BaseMessage | Mapping[str, Any]) -> bool:
    """True for the summary message inserted by ``SummarizationMiddleware``."""
    extra = (
        message.additional_kwargs
        if isinstance(message, BaseMessage)
        else message.get("additional_kwargs")
    )
    return isinstance(extra, Mapping) and extra.get("lc_source") == SUMMARY_MARKER


def split_exchanges(messages: Sequence[BaseMessage | Mapping[str, Any]]) -> list[Exchange]:
    """Cut ``messages`` into exchanges in order (see the module docstring for the rules)."""
    exchanges: list[Exchange] = []
    current: _Builder | None = None
    for message in messages:
        role = role_of(message)
        if role == "system" or is_summary(message):
            continue
        if role == "human":
            if current is None or current.has_ai:
                if current is not None:
                    exchanges.append(current.build())
                current = _Builder()
            current.add_user(message)
            continue
        if current is None:
            current = _Builder()
        current.add_other(message, role)
    if current is not None:
        exchanges.append(current.build())
    return exchanges


class _Builder:
    def __init__(self) -> None:
        self.user_texts: list[str] = []
        self.user_id: str | None = None
        self.reply_text: str | None = None
        self.reply_id: str | None = None
        self.ids: list[str] = []
        self.has_ai = False

    def add_user(self, message: BaseMessage | Mapping[str, Any]) -> None:
        self._note_id(message)
        text = text_of(message)
        if text:
            self.user_texts.append(text)
            # The last user message of the run is the one a reply answers; key on it.
            self.user_id = message_id(message) or self.user_id

    def add_other(self, message: BaseMessage | Mapping[str, Any], role: str) -> None:
        self._note_id(message)
        if role != "ai":
            return
        self.has_ai = True
        text = text_of(message)
        if has_tool_calls(message) or not text:
            # Tool traffic: an earlier text reply is superseded by this continuation.
            self.reply_text = None
            self.reply_id = None
        else:
            self.reply_text = text
            self.reply_id = message_id(message)

    def _note_id(self, message: BaseMessage | Mapping[str, Any]) -> None:
        mid = message_id(message)
        if mid:
            self.ids.append(mid)

    def build(self) -> Exchange:
        return Exchange(
            user_text="\n".join(self.user_texts) or None,
            user_message_id=self.user_id,
            reply_text=self.reply_text,
            reply_message_id=self.reply_id,
            message_ids=tuple(self.ids),
        )


def _truncate(text: str, max_bytes: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    cut = data[: max(0, max_bytes - len(_ELLIPSIS.encode()))].decode("utf-8", errors="ignore")
    return cut.rstrip() + _ELLIPSIS
