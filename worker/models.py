"""Candidate memories and the enqueue contract: the vocabulary shared by the hot path and the
worker. The contract itself (:class:`EnqueueFields`, :func:`validate_enqueue`, the stored shape)
lives in :mod:`worker.enqueue`, without pydantic, and namespaces in :mod:`worker.namespaces`;
both are re-exported here for callers.

>>> c = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", topic="drinks")
>>> (c.namespace, c.path)
('user:u1', '/memories/drinks.md')
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from typing_extensions import Unpack

from worker.constants import MAX_ID_LENGTH, MAX_TEXT_BYTES
from worker.enqueue import (
    ENQUEUE_FIELDS,
    REQUIRED_ENQUEUE_FIELDS,
    STORED_FIELDS,
    EnqueueFields,
    EnqueueValues,
    StoredCandidate,
    candidate_id_for,
    validate_enqueue,
)
from worker.errors import InvalidCandidate
from worker.fields import (
    SOURCES,
    Kind,
    Source,
    validate_key,
    validate_kind,
    validate_occurred_at,
    validate_source,
    validate_stored_path,
    validate_text,
    validate_time,
)
from worker.namespaces import Namespace, Scope, normalise_path, validate_id

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
    "StoredCandidate",
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


def _same_fields_as_stored() -> None:
    """Refuse to import if :class:`Candidate` and :class:`~worker.enqueue.StoredCandidate`
    (which the hot path writes without pydantic) declare different fields, order or types."""
    model = [(name, f.annotation) for name, f in Candidate.model_fields.items()]
    stored = list(STORED_FIELDS.items())
    if model != stored:
        raise TypeError(
            f"Candidate's fields {model} differ from worker.enqueue.StoredCandidate's "
            f"{stored}: declare a stored field in both, in the same order and type"
        )


_same_fields_as_stored()


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
