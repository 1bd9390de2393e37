"""The enqueue contract and the stored candidate's shape, without pydantic.

What every ``enqueue`` takes (:class:`EnqueueFields`), how it is checked
(:func:`validate_enqueue`) and what the queue stores (:class:`StoredCandidate`) are plain
Python here, so the hot-path clients validate and encode a candidate without importing pydantic
(a chat service pays for every import on each start). :class:`worker.models.Candidate`, the
pydantic model the worker decodes stored candidates with, declares the same fields in the same
order with the same types; :mod:`worker.models` refuses to import if the two differ, so the
stored shape cannot drift apart from the model.

>>> v = validate_enqueue({"user_id": "u1", "trace_id": "t1", "text": " I prefer tea "})
>>> (v.namespace.key, v.stored["text"], v.stored["kind"].value)
('user:u1', 'I prefer tea', 'fact')
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import (
    Any,
    Final,
    NamedTuple,
    NotRequired,
    TypedDict,
    get_origin,
    get_type_hints,
)

from worker.constants import CANDIDATE_ID_NAMESPACE, MAX_TEXT_BYTES
from worker.errors import InvalidCandidate
from worker.fields import (
    Kind,
    Source,
    validate_key,
    validate_kind,
    validate_occurred_at,
    validate_source,
    validate_text,
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
    "ENQUEUE_FIELDS",
    "REQUIRED_ENQUEUE_FIELDS",
    "EnqueueFields",
    "EnqueueValues",
    "StoredCandidate",
    "candidate_id_for",
    "validate_enqueue",
]


class StoredCandidate(TypedDict):
    """A candidate as the queue stores it (its JSON object's fields, in this order): the
    fields of :class:`worker.models.Candidate`, which must match these (checked when
    :mod:`worker.models` is imported). The hot path's JSON writer is generated from this
    declaration (:mod:`worker.hotpath.builder`)."""

    id: str
    namespace: str
    user_id: str | None
    trace_id: str
    thread_id: str | None
    kind: Kind
    path: str | None
    key: str | None
    text: str
    created_at: datetime
    occurred_at: datetime | None
    source: Source


#: :class:`StoredCandidate`'s fields and their types, in declaration order.
STORED_FIELDS: Final = get_type_hints(StoredCandidate)


class EnqueueFields(TypedDict):
    """The enqueue contract: the keyword arguments of every ``enqueue``, declared once.

    ``MemoryClient.enqueue`` / ``AsyncMemoryClient.enqueue`` take them as keywords
    (``**fields: Unpack[EnqueueFields]``), ``enqueue_many`` as one dict per candidate, and
    :func:`~worker.models.make_candidate` validates them. Adding a field is one line here
    plus its check in :func:`validate_enqueue`; one the candidate stores is also a field of
    :class:`StoredCandidate` (and an entry of ``stored`` below) and of
    :class:`~worker.models.Candidate`, and nothing else: the hot path's JSON writer is derived
    from :class:`StoredCandidate`.

    ``user_id``, ``trace_id`` and ``text`` are required (``user_id`` may be ``None`` in agent
    scope); the others default to: ``kind="fact"``, ``scope="user"``, ``source="hot_path"``,
    and ``None`` for ``topic``, ``key``, ``assistant_id``, ``thread_id``, ``idempotency_key``
    and ``occurred_at``.

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
    #: The user's organisation, when the deployment has orgs: a user-scope candidate then goes
    #: to ``org:<org>:user:<user>[:<assistant>]`` (the same user id in two orgs is two people).
    org_id: NotRequired[str | None]
    #: Which integration produced the candidate (default ``hot_path``).
    source: NotRequired[Source]
    #: When it was said (timezone-aware), if earlier than the enqueue: a replayed import, a
    #: scanned thread or a delayed capture. Merging decides by it (``Candidate.said_at``); at
    #: most ``MAX_OCCURRED_AT_SKEW`` after the enqueue, default: the enqueue time.
    occurred_at: NotRequired[datetime | None]


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


class EnqueueValues(NamedTuple):
    """One enqueue's fields, validated (:func:`validate_enqueue`).

    ``stored`` holds the :class:`StoredCandidate` fields but its id and creation time, by
    name and as stored, and both :func:`~worker.models.build_candidate` and the hot path's
    JSON writer (:mod:`worker.hotpath.builder`) take these values as they are.
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
    now: datetime | None = None,
) -> EnqueueValues:
    """Every check of :func:`~worker.models.build_candidate` but the idempotency key's (which
    :func:`candidate_id_for` makes), in the same order; shared with the hot-path clients,
    which build the stored form directly from it. ``now`` is the candidate's creation time,
    which ``occurred_at`` may not lie after (default: the current time).

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
        org_id=_one_org(fields.get("org_id"), org_id),
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
    occurred_at = fields.get("occurred_at")
    if occurred_at is not None:
        occurred_at = validate_occurred_at(occurred_at, now or datetime.now(UTC))
    stored = {
        "namespace": namespace.key,
        "user_id": user_id,
        "trace_id": trace_id,
        "thread_id": thread_id,
        "kind": kind,
        "path": path,
        "key": key,
        "text": text,
        "occurred_at": occurred_at,
        "source": source,
    }
    return EnqueueValues(namespace, fields.get("idempotency_key"), stored)


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
        return namespace_of(Scope.USER, user_id=user_id, assistant_id=assistant_id, org_id=org_id)
    if user_id is not None:
        validate_id(user_id, "user_id")
    if scope_value is Scope.AGENT:
        if assistant_id is None:
            raise InvalidCandidate("assistant_id is required for scope 'agent'")
        return namespace_of(Scope.AGENT, assistant_id=assistant_id)
    if org_id is None:
        raise InvalidCandidate("org_id is required for scope 'org'")
    return namespace_of(Scope.ORG, org_id=org_id)


def _one_org(field: str | None, keyword: str | None) -> str | None:
    """The candidate's org: the ``org_id`` field or the operator's ``org_id`` keyword; both
    given, they must agree."""
    if field is not None and keyword is not None and field != keyword:
        raise InvalidCandidate(f"org_id {field!r} and org_id {keyword!r} disagree; pass one")
    return field if field is not None else keyword


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
