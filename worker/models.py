"""Candidate memories and the enqueue contract: the vocabulary shared by the hot path and the
worker. Namespaces live in :mod:`worker.namespaces` (re-exported here for callers).

>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", topic="drinks")
>>> (c.namespace, c.path)
('user:u1', '/memories/drinks.md')
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import (
    Annotated,
    Any,
    Final,
    NamedTuple,
    NotRequired,
    Self,
    TypedDict,
    get_origin,
    get_type_hints,
)

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Unpack

from worker.constants import (
    CANDIDATE_ID_NAMESPACE,
    MAX_ID_LENGTH,
    MAX_TEXT_BYTES,
)
from worker.errors import InvalidCandidate
from worker.fields import (
    SOURCES,
    Kind,
    Source,
    validate_key,
    validate_kind,
    validate_source,
    validate_stored_path,
    validate_text,
    validate_time,
)
from worker.namespaces import (
    Namespace,
    Scope,
    namespace_of,
    normalise_path,
    refuse_reserved,
    validate_id,
)

__all__ = [
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


class EnqueueFields(TypedDict):
    """The enqueue contract: the keyword arguments of every ``enqueue``, declared once.

    ``MemoryClient.enqueue`` / ``AsyncMemoryClient.enqueue`` take them as keywords
    (``**fields: Unpack[EnqueueFields]``), ``enqueue_many`` as one dict per candidate, and
    :func:`make_candidate` validates them. Adding a field is one line here plus its check in
    :func:`validate_enqueue`; one the candidate stores is also a field of :class:`Candidate`
    (and an entry of ``stored`` there), and nothing else: the hot path's JSON writer is
    derived from the model.

    ``user_id``, ``trace_id`` and ``text`` are required (``user_id`` may be ``None`` in agent
    scope); the others default to: ``kind="fact"``, ``scope="user"``, ``source="hot_path"``,
    and ``None`` for ``topic``, ``key``, ``assistant_id``, ``thread_id`` and
    ``idempotency_key``.

    >>> sorted(REQUIRED_ENQUEUE_FIELDS)
    ['text', 'trace_id', 'user_id']
    """

    #: The user the memory is about; required for scope ``user``.
    user_id: str | None
    #: The request's trace id, kept on the candidate so a memory can be traced to its turn.
    trace_id: str
    #: What to remember (``fact``), an excerpt to extract from (``turn``), or what to remove.
    text: str
    #: ``fact``, ``turn`` or ``forget`` (default ``fact``).
    kind: NotRequired[str]
    #: A memory file hint such as ``preferences`` or ``/memories/work/projects.md``.
    topic: NotRequired[str | None]
    #: A slot such as ``preference.language``: a newer candidate with it supersedes the older.
    key: NotRequired[str | None]
    #: The assistant: per-assistant user memory, or the owner of agent-scope memory.
    assistant_id: NotRequired[str | None]
    #: The conversation thread the candidate came from.
    thread_id: NotRequired[str | None]
    #: Makes the candidate id deterministic, so a retried capture merges once.
    idempotency_key: NotRequired[str | None]
    #: ``user`` or ``agent`` (default ``user``); ``org`` is read-only for the hot path.
    scope: NotRequired[str]
    #: Which integration produced the candidate (default ``hot_path``).
    source: NotRequired[Source]


#: The fields of :class:`EnqueueFields` in declaration order, and as a set: any other keyword
#: is refused by name.
ENQUEUE_FIELD_ORDER: Final = tuple(EnqueueFields.__annotations__)
ENQUEUE_FIELDS: Final = frozenset(ENQUEUE_FIELD_ORDER)

#: The fields every enqueue must pass (derived from the TypedDict, whose string annotations
#: hide ``NotRequired`` from ``__required_keys__`` on Python 3.11).
REQUIRED_ENQUEUE_FIELDS: Final = frozenset(
    name
    for name, hint in get_type_hints(EnqueueFields, include_extras=True).items()
    if get_origin(hint) is not NotRequired
)


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
    max_text_bytes: int = MAX_TEXT_BYTES,
    allow_org: bool = False,
    org_id: str | None = None,
    now: datetime | None = None,
    **fields: Unpack[EnqueueFields],
) -> Candidate:
    """Validate the hot-path arguments (:class:`EnqueueFields`) and build a :class:`Candidate`.

    Every problem raises :class:`InvalidCandidate` with a message naming the argument, an
    unknown or missing field included. ``org_id`` and ``allow_org`` are for operators: the hot
    path cannot write org scope. ``now`` (default: the current time) is the creation time.

    >>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea")
    >>> (c.namespace, c.kind.value, c.path)
    ('user:u1', 'fact', None)
    """
    return build_candidate(
        fields, max_text_bytes=max_text_bytes, allow_org=allow_org, org_id=org_id, now=now
    )


class EnqueueValues(NamedTuple):
    """One enqueue's fields, validated (:func:`validate_enqueue`).

    ``stored`` holds the :class:`Candidate` fields but its id and creation time, by name and
    as stored: the model is the one declaration of the stored shape, and both
    :func:`build_candidate` and the hot path's JSON writer (:mod:`worker.hotpath.builder`)
    take these values as they are.
    """

    namespace: Namespace
    idempotency_key: str | None
    stored: dict[str, Any]


def validate_enqueue(
    fields: EnqueueFields,
    *,
    max_text_bytes: int = MAX_TEXT_BYTES,
    allow_org: bool = False,
    org_id: str | None = None,
) -> EnqueueValues:
    """Every check of :func:`build_candidate` but the idempotency key's (which
    :func:`candidate_id_for` makes), in the same order; shared with the hot-path clients,
    which build the stored form directly from it.

    >>> validate_enqueue({"user_id": "u1", "trace_id": "t1", "text": " tea "}).stored["text"]
    'tea'
    """
    keys = fields.keys()
    if not REQUIRED_ENQUEUE_FIELDS <= keys <= ENQUEUE_FIELDS:
        raise InvalidCandidate(_fields_problem(keys))
    user_id = fields["user_id"]
    kind = validate_kind(fields.get("kind", "fact"))
    trace_id = validate_id(fields["trace_id"], "trace_id")
    thread_id = fields.get("thread_id")
    if thread_id is not None:
        validate_id(thread_id, "thread_id")
    namespace = _namespace_for(
        fields.get("scope", "user"),
        user_id=user_id,
        assistant_id=fields.get("assistant_id"),
        org_id=org_id,
        allow_org=allow_org,
    )
    text = validate_text(fields["text"], max_text_bytes)
    topic = fields.get("topic")
    try:
        path = normalise_path(topic) if topic is not None else None
    except InvalidCandidate as exc:
        raise InvalidCandidate(f"topic {topic!r}: {exc}") from None
    if path is not None:
        refuse_reserved(path, f"topic {topic!r}")
    key = validate_key(fields.get("key"))
    source = validate_source(fields.get("source", "hot_path"))
    stored = {
        "namespace": namespace.key,
        "user_id": user_id,
        "trace_id": trace_id,
        "thread_id": thread_id,
        "kind": kind,
        "path": path,
        "key": key,
        "text": text,
        "source": source,
    }
    return EnqueueValues(namespace, fields.get("idempotency_key"), stored)


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
    v = validate_enqueue(fields, max_text_bytes=max_text_bytes, allow_org=allow_org, org_id=org_id)
    created = validate_time(now, "now") if now is not None else datetime.now(UTC)
    cid = candidate_id_for(v.namespace, v.idempotency_key)
    return Candidate.model_construct(id=cid, created_at=created, **v.stored)


def _namespace_for(
    scope: str,
    *,
    user_id: str | None,
    assistant_id: str | None,
    org_id: str | None,
    allow_org: bool,
) -> Namespace:
    """The namespace a candidate of ``scope`` goes to; the ids the scope needs are required."""
    try:
        scope_value = Scope(scope)
    except ValueError:
        raise InvalidCandidate(f"scope {scope!r} is not one of user, agent, org") from None
    if scope_value is Scope.ORG and not allow_org:
        raise InvalidCandidate(
            "scope 'org' is read-only for the hot path; operators write it with `memworker put`"
        )
    if scope_value is Scope.USER:
        if user_id is None:
            raise InvalidCandidate("user_id is required for scope 'user'")
        return namespace_of(Scope.USER, user_id=user_id, assistant_id=assistant_id)
    if user_id is not None:
        validate_id(user_id, "user_id")
    if scope_value is Scope.AGENT:
        if assistant_id is None:
            raise InvalidCandidate("assistant_id is required for scope 'agent'")
        return namespace_of(Scope.AGENT, assistant_id=assistant_id)
    if org_id is None:
        raise InvalidCandidate("org_id is required for scope 'org'")
    return namespace_of(Scope.ORG, org_id=org_id)


def _fields_problem(keys: Iterable[Any]) -> str:
    """Why these keyword names are not an :class:`EnqueueFields`: unknown or missing ones."""
    names = set(keys)
    unknown = sorted(map(repr, names - ENQUEUE_FIELDS))
    if unknown:
        return f"unknown enqueue field(s) {', '.join(unknown)}; the fields are {_FIELD_LIST}"
    missing = [repr(n) for n in ENQUEUE_FIELD_ORDER if n in REQUIRED_ENQUEUE_FIELDS - names]
    return f"missing enqueue field(s) {', '.join(missing)}; {_REQUIRED_LIST} are required"


_FIELD_LIST: Final = ", ".join(ENQUEUE_FIELD_ORDER)
_REQUIRED_LIST: Final = ", ".join(n for n in ENQUEUE_FIELD_ORDER if n in REQUIRED_ENQUEUE_FIELDS)
