"""The pydantic vocabulary: candidate memories, a namespace's memory and its changes, and chat
transcripts cut into exchanges.

**Candidates.** :class:`Candidate` is the one declaration of what the queue stores, shared by the
hot path and the worker; the enqueue contract (:class:`EnqueueFields`,
:func:`validate_enqueue`) and namespaces live in :mod:`worker.types` and are re-exported here.

>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", topic="drinks")
>>> (c.namespace, c.path)
('user:u1', '/memories/drinks.md')

**A namespace's memory and its changes.** The store reads and writes these; the consolidators
read a :class:`NamespaceState` and their plans are applied into an :class:`AppliedPlan`.

>>> from datetime import UTC, datetime
>>> t = datetime(2025, 1, 1, tzinfo=UTC)
>>> e = Entry(id="e1", path="/memories/facts.md", text="Likes tea", valid_from=t,
...           created_at=t, last_confirmed_at=t)
>>> NamespaceState("user:u1", 3, None, entries=(e,)).paths()
['/memories/facts.md']

**Exchanges**: a user's input paired with the final reply. The capture middleware, the
summarisation flush and the thread-scan source all cut a message list the same way, so an
exchange gets the same idempotency key (``thread:<thread_id>:<message id>``) whichever of them
sees it first, and the candidate ledger keeps only one. Rules:

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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Unpack

from worker.errors import InvalidCandidate
from worker.types import (
    ENQUEUE_FIELDS,
    MAX_ID_LENGTH,
    MAX_TEXT_BYTES,
    REQUIRED_ENQUEUE_FIELDS,
    SOURCES,
    EnqueueFields,
    EnqueueValues,
    Kind,
    Namespace,
    Scope,
    Source,
    candidate_id_for,
    normalise_path,
    validate_enqueue,
    validate_id,
    validate_key,
    validate_kind,
    validate_occurred_at,
    validate_source,
    validate_stored_path,
    validate_text,
    validate_time,
)

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

__all__ = [
    "ENQUEUE_FIELDS",
    "REQUIRED_ENQUEUE_FIELDS",
    "SOURCES",
    "Candidate",
    "EnqueueFields",
    "EnqueueValues",
    "Kind",
    "Namespace",
    "Scope",
    "Source",
    "build_candidate",
    "candidate_id_for",
    "make_candidate",
    "normalise_path",
    "validate_enqueue",
    "validate_id",
]


class Candidate(BaseModel):
    """One proposed memory update, as it travels through the queue.

    Build candidates with :func:`make_candidate` (which validates and raises
    :class:`InvalidCandidate`); the hot-path clients do this for you. Validating a stored
    candidate (``model_validate_json``, as the queue decodes its log) runs the same checks,
    all but the deployment's text size limit.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH)]
    namespace: str
    user_id: str | None
    trace_id: str
    thread_id: str | None = None
    kind: Kind = Kind.FACT
    path: str | None = None
    key: str | None = None
    text: str
    created_at: datetime
    occurred_at: datetime | None = None
    source: Source = "hot_path"

    # The same checks as make_candidate (the text size limit aside: it is the deployment's),
    # so a log entry decodes only if make_candidate could have built it.
    @field_validator("namespace")
    @classmethod
    def _namespace_parses(cls, value: str) -> str:
        Namespace.parse(value)
        return value

    @field_validator("user_id", "trace_id", "thread_id")
    @classmethod
    def _ids_are_valid(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else validate_id(value, str(info.field_name))

    @field_validator("kind", mode="before")
    @classmethod
    def _kind_is_known(cls, value: Any) -> Kind:
        return validate_kind(value)

    @field_validator("source", mode="before")
    @classmethod
    def _source_is_known(cls, value: Any) -> Source:
        return validate_source(value)

    @field_validator("path")
    @classmethod
    def _path_is_normalised(cls, value: str | None) -> str | None:
        return validate_stored_path(value)

    @field_validator("key")
    @classmethod
    def _key_is_a_slot(cls, value: str | None) -> str | None:
        return validate_key(value)

    @field_validator("text")
    @classmethod
    def _text_is_valid(cls, value: str) -> str:
        return validate_text(value)

    @field_validator("created_at")
    @classmethod
    def _created_at_is_aware(cls, value: datetime) -> datetime:
        return validate_time(value, "created_at")

    @field_validator("occurred_at")
    @classmethod
    def _occurred_at_is_aware(cls, value: datetime | None) -> datetime | None:
        return None if value is None else validate_time(value, "occurred_at")

    @model_validator(mode="after")
    def _occurred_before_created(self) -> Self:
        validate_occurred_at(self.occurred_at, self.created_at)
        return self

    @model_validator(mode="after")
    def _user_id_fits_namespace(self) -> Self:
        ns = Namespace.parse(self.namespace)
        if ns.scope is Scope.USER and self.user_id != ns.user_id:
            raise InvalidCandidate(
                f"user_id {self.user_id!r} is not the user of namespace {self.namespace}"
            )
        return self

    @property
    def ns(self) -> Namespace:
        return Namespace.parse(self.namespace)

    @property
    def said_at(self) -> datetime:
        """The event time: when it was said (``occurred_at``) if the caller knew, else when it
        was enqueued (``created_at``). Merging decides by it, not by arrival order, so a
        replayed or late candidate does not overrule what was said after it; a new entry's
        ``valid_from`` is its candidates' earliest ``said_at``."""
        return self.created_at if self.occurred_at is None else self.occurred_at


def make_candidate(
    *,
    max_text_bytes: int = MAX_TEXT_BYTES,
    allow_org: bool = False,
    now: datetime | None = None,
    **fields: Unpack[EnqueueFields],
) -> Candidate:
    """Validate the hot-path arguments (:class:`EnqueueFields`) and build a :class:`Candidate`.

    Every problem raises :class:`InvalidCandidate` with a message naming the argument, an
    unknown or missing field included. ``allow_org`` is for operators: the hot path cannot
    write org scope. ``org_id`` is the user's org in user scope (``org:<org>:user:<user>``),
    the org itself in org scope. ``now`` (default: the current time) is the creation time.

    >>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea")
    >>> (c.namespace, c.kind.value, c.path)
    ('user:u1', 'fact', None)
    """
    return build_candidate(fields, max_text_bytes=max_text_bytes, allow_org=allow_org, now=now)


def build_candidate(
    fields: EnqueueFields,
    *,
    max_text_bytes: int = MAX_TEXT_BYTES,
    allow_org: bool = False,
    org_id: str | None = None,
    now: datetime | None = None,
) -> Candidate:
    """:func:`make_candidate` for fields already in a dict (the clients' ``**fields``), so the
    hot path does not copy them again.

    >>> build_candidate({"user_id": "u1", "trace_id": "t1", "text": "tea"}).namespace
    'user:u1'
    """
    created = validate_time(now, "now") if now is not None else datetime.now(UTC)
    v = validate_enqueue(
        fields, max_text_bytes=max_text_bytes, allow_org=allow_org, org_id=org_id, now=created
    )
    cid = candidate_id_for(v.namespace, v.idempotency_key)
    return Candidate.model_construct(id=cid, created_at=created, **v.stored)


class Entry(BaseModel):
    """One remembered statement inside a memory file. Superseded entries keep their row."""

    model_config = ConfigDict(frozen=True)

    id: str
    path: str
    text: str
    key: str | None = None
    valid_from: datetime
    invalid_at: datetime | None = None
    invalid_reason: str | None = None
    superseded_by: str | None = None
    confirmations: int = 1
    candidate_ids: tuple[str, ...] = ()
    trace_ids: tuple[str, ...] = ()
    created_at: datetime
    last_confirmed_at: datetime

    @property
    def active(self) -> bool:
        return self.invalid_at is None


@dataclass(frozen=True)
class NamespaceState:
    """What a consolidator sees of one namespace: its active entries, grouped by file path."""

    namespace: str
    version: int
    applied_position: str | None
    entries: tuple[Entry, ...] = ()
    read_only_paths: frozenset[str] = field(default_factory=frozenset)

    def paths(self) -> list[str]:
        return sorted({e.path for e in self.entries})


LedgerOutcome = Literal["merged", "duplicate", "forgotten", "rejected", "pending_approval"]


@dataclass(frozen=True)
class LedgerRow:
    """What became of one candidate."""

    candidate_id: str
    trace_id: str
    outcome: LedgerOutcome
    reason: str | None = None
    entry_id: str | None = None
    #: Where and when the candidate was said (its ``source``, ``thread_id``, ``created_at``).
    source: str | None = None
    thread_id: str | None = None
    said_at: datetime | None = None
    #: The plan operation that consumed it (``add``, ``supersede``, ``confirm``, …).
    operation: str | None = None


@dataclass(frozen=True)
class FileChange:
    """A memory file's new rendered content and the unified diff from its previous version."""

    path: str
    content: str
    diff: str
    previous_content: str | None


@dataclass(frozen=True)
class PendingApproval:
    """An operation on a read-only or sensitive path, waiting for an operator."""

    path: str
    operation: dict[str, object]
    candidate_ids: tuple[str, ...]


@dataclass(frozen=True)
class AppliedPlan:
    """A validated plan applied to a state: everything the commit writes, computed up front."""

    new_entries: tuple[Entry, ...]  #: entries to insert
    changed_entries: tuple[Entry, ...]  #: existing entries updated (invalidated or confirmed)
    files: tuple[FileChange, ...]  #: files whose rendered content changed
    ledger: tuple[LedgerRow, ...]  #: one row per candidate of the batch
    approvals: tuple[PendingApproval, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)  #: added/superseded/duplicates/…


@dataclass(frozen=True)
class MemoryHit:
    """One committed entry that matched a search (the search tools' and the SQL search's shared
    result)."""

    path: str
    text: str


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
    if isinstance(message, Mapping):
        raw = str(message.get("type") or message.get("role") or "")
    else:
        raw = message.type
    return _ROLE_ALIASES.get(raw, raw)


def message_id(message: BaseMessage | Mapping[str, Any]) -> str | None:
    """The message's id, if it has one."""
    value = message.get("id") if isinstance(message, Mapping) else message.id
    return str(value) if value else None


def text_of(message: BaseMessage | Mapping[str, Any]) -> str:
    """The plain text of a message: string content, or the ``text`` blocks of a list."""
    content = message.get("content") if isinstance(message, Mapping) else message.content
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
        message.get("tool_calls")
        if isinstance(message, Mapping)
        else getattr(message, "tool_calls", None)
    )
    return bool(calls)


def is_summary(message: BaseMessage | Mapping[str, Any]) -> bool:
    """True for the summary message inserted by ``SummarizationMiddleware``."""
    extra = (
        message.get("additional_kwargs")
        if isinstance(message, Mapping)
        else message.additional_kwargs
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
