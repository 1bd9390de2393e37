"""Namespaces and candidate memories: the vocabulary shared by the hot path and the worker.

>>> from worker.models import Namespace, normalise_path
>>> Namespace.for_user("u1", assistant_id="support-bot").key
'user:u1:support-bot'
>>> Namespace.parse("agent:support-bot").scope.value
'agent'
>>> normalise_path("work/projects")
'/memories/work/projects.md'
"""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Final, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from worker.constants import (
    CANDIDATE_ID_NAMESPACE,
    ID_PATTERN,
    KEY_PATTERN,
    MAX_ID_LENGTH,
    MAX_PATH_LENGTH,
    MEMORY_ROUTE,
    PATH_SEGMENT_PATTERN,
)
from worker.errors import InvalidCandidate


class Scope(StrEnum):
    """Who a memory belongs to."""

    USER = "user"  #: one user (optionally of one assistant); the hot path's default
    AGENT = "agent"  #: shared by all users of one assistant
    ORG = "org"  #: organisation-wide, read-only for the hot path; operators write it


class Kind(StrEnum):
    """What a candidate asks for."""

    FACT = "fact"  #: a statement to remember
    TURN = "turn"  #: a conversation excerpt to extract memories from
    FORGET = "forget"  #: something to remove


Source = Literal["hot_path", "middleware", "tool", "summary_flush", "thread_scan", "cli", "import"]

#: The valid ``source`` values; checked at enqueue, since a candidate is built without pydantic
#: validation and a bad value would otherwise only fail when the worker decodes the batch.
SOURCES: Final = frozenset(get_args(Source))


def validate_id(value: str, what: str) -> str:
    """Return ``value`` if it is a valid id, else raise :class:`InvalidCandidate` naming it.

    >>> validate_id("user-42", "user_id")
    'user-42'
    """
    if not isinstance(value, str):
        raise InvalidCandidate(f"{what} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidCandidate(f"{what} is empty; pass the id of the {what.removesuffix('_id')}")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidCandidate(
            f"{what} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}"
        )
    if not ID_PATTERN.fullmatch(value):
        raise InvalidCandidate(
            f"{what} {value!r} has characters outside [A-Za-z0-9_.@-] or does not start with a "
            "letter or digit"
        )
    return value


def normalise_path(value: str) -> str:
    """Normalise a topic or path to a Markdown file confined under ``/memories/``.

    Bare topics become files (``"preferences"`` → ``/memories/preferences.md``); traversal,
    empty segments, backslashes and paths outside the route are refused.

    >>> normalise_path("/memories/preferences.md")
    '/memories/preferences.md'
    """
    if not isinstance(value, str):
        raise InvalidCandidate(f"path must be a string, got {type(value).__name__}")
    raw = value.strip()
    if not raw:
        raise InvalidCandidate("path/topic is empty")
    if "\\" in raw or any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise InvalidCandidate(f"path {value!r} contains a backslash or a control character")
    if raw.startswith("/"):
        if not raw.startswith(MEMORY_ROUTE):
            raise InvalidCandidate(f"path {value!r} is outside {MEMORY_ROUTE}")
        raw = raw[len(MEMORY_ROUTE) :]
    segments = raw.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidCandidate(f"path {value!r} has an empty, '.' or '..' segment")
        if not PATH_SEGMENT_PATTERN.fullmatch(segment):
            raise InvalidCandidate(
                f"path segment {segment!r} of {value!r} must match [A-Za-z0-9_][A-Za-z0-9_.-]*"
            )
    if not segments[-1].endswith(".md"):
        segments[-1] += ".md"
    path = MEMORY_ROUTE + "/".join(segments)
    if len(path) > MAX_PATH_LENGTH:
        raise InvalidCandidate(f"path {value!r} is longer than {MAX_PATH_LENGTH} characters")
    return path


class Namespace(BaseModel):
    """Who a memory belongs to; never derived from free text.

    ``key`` is the canonical string form used in Redis keys and SQL rows.
    """

    model_config = ConfigDict(frozen=True)

    scope: Scope
    user_id: str | None = None
    assistant_id: str | None = None
    org_id: str | None = None

    @model_validator(mode="after")
    def _ids_fit_scope(self) -> Self:
        for name in ("user_id", "assistant_id", "org_id"):
            value = getattr(self, name)
            if value is not None:
                validate_id(value, name)
        if self.scope is Scope.USER and (self.user_id is None or self.org_id is not None):
            raise InvalidCandidate("a user-scope namespace needs user_id (and no org_id)")
        if self.scope is Scope.AGENT and (
            self.assistant_id is None or self.user_id is not None or self.org_id is not None
        ):
            raise InvalidCandidate("an agent-scope namespace needs assistant_id only")
        if self.scope is Scope.ORG and (
            self.org_id is None or self.user_id is not None or self.assistant_id is not None
        ):
            raise InvalidCandidate("an org-scope namespace needs org_id only")
        return self

    @classmethod
    def for_user(cls, user_id: str, *, assistant_id: str | None = None) -> Namespace:
        return _namespace(Scope.USER, user_id=user_id, assistant_id=assistant_id)

    @classmethod
    def for_agent(cls, assistant_id: str) -> Namespace:
        return _namespace(Scope.AGENT, assistant_id=assistant_id)

    @classmethod
    def for_org(cls, org_id: str) -> Namespace:
        return _namespace(Scope.ORG, org_id=org_id)

    @property
    def key(self) -> str:
        if self.scope is Scope.USER:
            suffix = f":{self.assistant_id}" if self.assistant_id else ""
            return f"user:{self.user_id}{suffix}"
        if self.scope is Scope.AGENT:
            return f"agent:{self.assistant_id}"
        return f"org:{self.org_id}"

    @classmethod
    def parse(cls, key: str) -> Namespace:
        """Inverse of :attr:`key`; raises :class:`InvalidCandidate` on a malformed key."""
        parts = key.split(":") if isinstance(key, str) else []
        try:
            match parts:
                case ["user", user]:
                    return cls.for_user(user)
                case ["user", user, assistant]:
                    return cls.for_user(user, assistant_id=assistant)
                case ["agent", assistant]:
                    return cls.for_agent(assistant)
                case ["org", org]:
                    return cls.for_org(org)
        except InvalidCandidate as exc:
            raise InvalidCandidate(f"namespace {key!r}: {exc}") from None
        raise InvalidCandidate(
            f"namespace {key!r} is not one of user:<user>[:<assistant>], agent:<assistant>, "
            "org:<org>"
        )

    def __str__(self) -> str:
        return self.key


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


class Candidate(BaseModel):
    """One proposed memory update, as it travels through the queue.

    Build candidates with :func:`make_candidate` (which validates and raises
    :class:`InvalidCandidate`); the hot-path clients do this for you.
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
    source: Source = "hot_path"

    @field_validator("namespace")
    @classmethod
    def _namespace_parses(cls, value: str) -> str:
        Namespace.parse(value)
        return value

    @property
    def ns(self) -> Namespace:
        return Namespace.parse(self.namespace)


def candidate_id_for(namespace: Namespace, idempotency_key: str | None) -> str:
    """A fresh random id, or a deterministic one derived from the caller's idempotency key.

    >>> ns = Namespace.for_user("u1")
    >>> candidate_id_for(ns, "turn-7") == candidate_id_for(ns, "turn-7")
    True
    """
    if idempotency_key is None:
        return uuid.uuid4().hex
    if not isinstance(idempotency_key, str) or not idempotency_key or len(idempotency_key) > 512:
        raise InvalidCandidate("idempotency_key must be a non-empty string of at most 512 chars")
    ns_uuid = uuid.UUID(CANDIDATE_ID_NAMESPACE)
    return uuid.uuid5(ns_uuid, f"{namespace.key}\x00{idempotency_key}").hex


def make_candidate(
    *,
    user_id: str | None,
    trace_id: str,
    text: str,
    kind: str = "fact",
    topic: str | None = None,
    key: str | None = None,
    assistant_id: str | None = None,
    org_id: str | None = None,
    thread_id: str | None = None,
    idempotency_key: str | None = None,
    scope: str = "user",
    source: Source = "hot_path",
    max_text_bytes: int = 8192,
    allow_org: bool = False,
    now: datetime | None = None,
) -> Candidate:
    """Validate the hot-path arguments and build a :class:`Candidate`.

    Every problem raises :class:`InvalidCandidate` with a message naming the argument.

    >>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea")
    >>> (c.namespace, c.kind.value, c.path)
    ('user:u1', 'fact', None)
    """
    try:
        scope_value = Scope(scope)
    except ValueError:
        raise InvalidCandidate(f"scope {scope!r} is not one of user, agent, org") from None
    if scope_value is Scope.ORG and not allow_org:
        raise InvalidCandidate(
            "scope 'org' is read-only for the hot path; operators write it with `memworker put`"
        )
    try:
        kind_value = Kind(kind)
    except ValueError:
        raise InvalidCandidate(f"kind {kind!r} is not one of fact, turn, forget") from None
    validate_id(trace_id, "trace_id")
    if thread_id is not None:
        validate_id(thread_id, "thread_id")
    if scope_value is Scope.USER:
        if user_id is None:
            raise InvalidCandidate("user_id is required for scope 'user'")
        namespace = _namespace(Scope.USER, user_id=user_id, assistant_id=assistant_id)
    elif scope_value is Scope.AGENT:
        if assistant_id is None:
            raise InvalidCandidate("assistant_id is required for scope 'agent'")
        if user_id is not None:
            validate_id(user_id, "user_id")
        namespace = _namespace(Scope.AGENT, assistant_id=assistant_id)
    else:
        if org_id is None:
            raise InvalidCandidate("org_id is required for scope 'org'")
        namespace = _namespace(Scope.ORG, org_id=org_id)
    if not isinstance(text, str):
        raise InvalidCandidate(f"text must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise InvalidCandidate("text is empty; a candidate needs something to remember")
    if "\x00" in stripped:
        raise InvalidCandidate("text contains a NUL character")
    size = len(stripped.encode("utf-8", errors="surrogatepass"))
    if size > max_text_bytes:
        raise InvalidCandidate(f"text is {size} bytes; the limit is {max_text_bytes} bytes")
    try:
        stripped.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidCandidate("text is not valid Unicode (lone surrogate)") from None
    try:
        path = normalise_path(topic) if topic is not None else None
    except InvalidCandidate as exc:
        raise InvalidCandidate(f"topic {topic!r}: {exc}") from None
    if key is not None and (not isinstance(key, str) or not KEY_PATTERN.fullmatch(key)):
        raise InvalidCandidate(f"key {key!r} must match [a-z0-9][a-z0-9_.-]* (at most 100 chars)")
    if not isinstance(source, str) or source not in SOURCES:
        raise InvalidCandidate(f"source {source!r} is not one of {', '.join(sorted(SOURCES))}")
    created = now or datetime.now(UTC)
    if created.tzinfo is None:
        raise InvalidCandidate("now must be timezone-aware")
    return Candidate.model_construct(
        id=candidate_id_for(namespace, idempotency_key),
        namespace=namespace.key,
        user_id=user_id,
        trace_id=trace_id,
        thread_id=thread_id,
        kind=kind_value,
        path=path,
        key=key,
        text=stripped,
        created_at=created.astimezone(UTC),
        source=source,
    )


#: Namespaces seen recently, so the hot path builds each one once. Namespaces are frozen and
#: their ids validated before the lookup; 4096 covers the active users of a busy process.
NAMESPACE_CACHE_SIZE = 4096


def _namespace(scope: Scope, **ids: str | None) -> Namespace:
    for name, value in ids.items():
        if value is not None:
            validate_id(value, name)
    return _build_namespace(scope, ids.get("user_id"), ids.get("assistant_id"), ids.get("org_id"))


@functools.lru_cache(maxsize=NAMESPACE_CACHE_SIZE)
def _build_namespace(
    scope: Scope, user_id: str | None, assistant_id: str | None, org_id: str | None
) -> Namespace:
    try:
        return Namespace(scope=scope, user_id=user_id, assistant_id=assistant_id, org_id=org_id)
    except ValidationError as exc:
        raise InvalidCandidate(_first_error(exc)) from None
