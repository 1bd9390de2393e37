"""What each field of a candidate may hold, checked the same way on enqueue and on decode.

:func:`worker.models.make_candidate` (the hot path) and the :class:`~worker.models.Candidate`
model's validators (the queue decoding its log) both call these, so a log entry decodes only
if the hot path could have written it.

>>> validate_kind("turn"), validate_key("preference.language")
(<Kind.TURN: 'turn'>, 'preference.language')
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Final, Literal, get_args

from worker.constants import KEY_PATTERN, MAX_OCCURRED_AT_SKEW
from worker.errors import InvalidCandidate
from worker.namespaces import normalise_path


class Kind(StrEnum):
    """What a candidate asks for."""

    FACT = "fact"  #: a statement to remember
    TURN = "turn"  #: a conversation excerpt to extract memories from
    FORGET = "forget"  #: something to remove


Source = Literal[
    "hot_path",
    "middleware",
    "tool",
    "summary_flush",
    "thread_scan",
    "cli",
    "import",
    "agent_edit",
    "inbox",
]

#: The valid ``source`` values; checked at enqueue, since a candidate is built without pydantic
#: validation and a bad value would otherwise only fail when the worker decodes the batch.
SOURCES: Final = frozenset(get_args(Source))


def validate_text(value: str, max_bytes: int | None = None) -> str:
    """``value`` stripped, if it is non-empty text without NUL or lone surrogates and at most
    ``max_bytes`` UTF-8 bytes (``None``: no size limit); else :class:`InvalidCandidate`.

    >>> validate_text("  I prefer tea ")
    'I prefer tea'
    """
    if not isinstance(value, str):
        raise InvalidCandidate(f"text must be a string, got {type(value).__name__}")
    stripped = value.strip()
    if not stripped:
        raise InvalidCandidate("text is empty; a candidate needs something to remember")
    if "\x00" in stripped:
        raise InvalidCandidate("text contains a NUL character")
    if max_bytes is not None:
        size = len(stripped.encode("utf-8", errors="surrogatepass"))
        if size > max_bytes:
            raise InvalidCandidate(f"text is {size} bytes; the limit is {max_bytes} bytes")
    try:
        stripped.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidCandidate("text is not valid Unicode (lone surrogate)") from None
    return stripped


def validate_key(value: str | None) -> str | None:
    """``value`` if it is ``None`` or a slot name such as ``preference.language``.

    >>> validate_key("preference.language")
    'preference.language'
    """
    if value is not None and (not isinstance(value, str) or not KEY_PATTERN.fullmatch(value)):
        raise InvalidCandidate(f"key {value!r} must match [a-z0-9][a-z0-9_.-]* (at most 100 chars)")
    return value


def validate_kind(value: str) -> Kind:
    """The :class:`Kind` named ``value``.

    >>> validate_kind("turn")
    <Kind.TURN: 'turn'>
    """
    try:
        return Kind(value)
    except ValueError:
        raise InvalidCandidate(f"kind {value!r} is not one of fact, turn, forget") from None


def validate_source(value: str) -> Source:
    """``value`` if it is one of :data:`SOURCES`.

    >>> validate_source("tool")
    'tool'
    """
    if not isinstance(value, str) or value not in SOURCES:
        raise InvalidCandidate(f"source {value!r} is not one of {', '.join(sorted(SOURCES))}")
    return value  # type: ignore[return-value]  # checked against SOURCES just above


def validate_time(value: datetime, what: str) -> datetime:
    """``value`` in UTC; a naive time is refused (it would be read as local time somewhere).

    >>> validate_time(datetime(2025, 1, 1, tzinfo=UTC), "now").isoformat()
    '2025-01-01T00:00:00+00:00'
    """
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidCandidate(f"{what} must be timezone-aware")
    return value.astimezone(UTC)


def validate_occurred_at(value: datetime | None, created_at: datetime) -> datetime | None:
    """``value`` (when the candidate was said) in UTC, or ``None``; a naive time is refused, and
    so is one more than :data:`~worker.constants.MAX_OCCURRED_AT_SKEW` after ``created_at``
    (when it was enqueued): an event cannot have happened after it was reported, and a future
    event time would win every later merge.

    >>> t = datetime(2025, 1, 1, 12, tzinfo=UTC)
    >>> validate_occurred_at(datetime(2025, 1, 1, 9, tzinfo=UTC), t).isoformat()
    '2025-01-01T09:00:00+00:00'
    """
    if value is None:
        return None
    occurred = validate_time(value, "occurred_at")
    ahead = occurred - created_at
    if ahead > MAX_OCCURRED_AT_SKEW:
        raise InvalidCandidate(
            f"occurred_at {occurred.isoformat()} is {ahead} after the candidate was created "
            f"({created_at.isoformat()}); an event time cannot lie in the future (at most "
            f"{MAX_OCCURRED_AT_SKEW} of clock skew is allowed): pass when it was said, "
            "timezone-aware"
        )
    return occurred


def validate_stored_path(value: str | None) -> str | None:
    """``value`` if it is ``None`` or already what :func:`normalise_path` makes of it.

    A stored candidate carries the normalised path; anything else was not written by
    :func:`make_candidate`.

    >>> validate_stored_path("/memories/work/projects.md")
    '/memories/work/projects.md'
    """
    if value is None:
        return None
    normalised = normalise_path(value)
    if normalised != value:
        raise InvalidCandidate(f"path {value!r} is not normalised (expected {normalised!r})")
    return value
