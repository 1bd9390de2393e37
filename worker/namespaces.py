"""Namespaces: who a memory belongs to, with the ids and paths that may name it.

A namespace is built from validated ids only, never from free text; its ``key`` is the one
string form every layer uses (Redis keys, SQL rows, store labels).

>>> from worker.namespaces import Namespace, normalise_path
>>> Namespace.for_user("u1", assistant_id="support-bot").key
'user:u1:support-bot'
>>> Namespace.parse("agent:support-bot").scope.value
'agent'
>>> Namespace.for_user("alice", assistant_id="bot", org_id="acme").key
'org:acme:user:alice:bot'
>>> normalise_path("work/projects")
'/memories/work/projects.md'
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from worker.constants import (
    ID_PATTERN,
    MAX_ID_LENGTH,
    MAX_PATH_LENGTH,
    MEMORY_ROUTE,
    PATH_SEGMENT_PATTERN,
    RESERVED_PREFIXES,
)
from worker.errors import InvalidCandidate


class Scope(StrEnum):
    """Who a memory belongs to."""

    USER = "user"  #: one user (optionally of one assistant, and of one org); the hot path's default
    AGENT = "agent"  #: shared by all users of one assistant
    ORG = "org"  #: organisation-wide, read-only for the hot path; operators write it


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
    return _normalise_path(value)


@functools.lru_cache(maxsize=4096)  # a namespace's few paths, checked for every entry of a batch
def _normalise_path(value: str) -> str:
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


def reserved_prefix(path: str, extra: Iterable[str] = ()) -> str | None:
    """The reserved prefix (:data:`~worker.constants.RESERVED_PREFIXES`, plus ``extra``) that
    the normalised ``path`` falls under, or ``None`` when memworker may write it.

    >>> reserved_prefix("/memories/inbox/t1/notes.md"), reserved_prefix("/memories/facts.md")
    ('/memories/inbox/', None)
    """
    for prefix in (*RESERVED_PREFIXES, *extra):
        if path.startswith(prefix):
            return prefix
    return None


def refuse_reserved(path: str, what: str, extra: Iterable[str] = ()) -> str:
    """``path`` (normalised) unless it is reserved; else :class:`InvalidCandidate` naming the
    prefix and what to do instead.

    >>> refuse_reserved("/memories/inbox/x.md", "topic 'inbox/x'")
    Traceback (most recent call last):
    ...
    worker.errors.InvalidCandidate: topic 'inbox/x' is under the reserved prefix /memories/inbox/ (the inbox route agents write and the inbox scan empties); memworker never writes there: choose another topic or path
    """  # noqa: E501
    prefix = reserved_prefix(path, extra)
    if prefix is not None:
        raise InvalidCandidate(
            f"{what} is under the reserved prefix {prefix} (the inbox route agents write and the "
            "inbox scan empties); memworker never writes there: choose another topic or path"
        )
    return path


@dataclass(frozen=True, slots=True)
class Namespace:
    """Who a memory belongs to; never derived from free text.

    ``key`` is the canonical string form used in Redis keys and SQL rows. A user namespace may
    carry the user's organisation (``org_id``): the same user id in two organisations is two
    people, so the org is part of the key, ``org:<org>:user:<user>[:<assistant>]``. Without an
    org the key is ``user:<user>[:<assistant>]``, as it always was (no stored data moves); a
    deployment without orgs must then keep user ids unique across itself. A plain frozen
    dataclass, not a pydantic model: the hot-path client builds one per enqueue and imports
    no pydantic (its validation is the ids' and the scope's rules below, checked on
    construction; a bad one raises :class:`InvalidCandidate`).
    """

    scope: Scope
    user_id: str | None = None
    assistant_id: str | None = None
    org_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scope, Scope):
            try:
                object.__setattr__(self, "scope", Scope(self.scope))
            except ValueError:
                raise InvalidCandidate(
                    f"scope {self.scope!r} is not one of user, agent, org"
                ) from None
        for name in ("user_id", "assistant_id", "org_id"):
            value = getattr(self, name)
            if value is not None:
                validate_id(value, name)
        if self.scope is Scope.USER and self.user_id is None:
            raise InvalidCandidate("a user-scope namespace needs user_id")
        if self.scope is Scope.AGENT and (
            self.assistant_id is None or self.user_id is not None or self.org_id is not None
        ):
            raise InvalidCandidate("an agent-scope namespace needs assistant_id only")
        if self.scope is Scope.ORG and (
            self.org_id is None or self.user_id is not None or self.assistant_id is not None
        ):
            raise InvalidCandidate("an org-scope namespace needs org_id only")

    @classmethod
    def for_user(
        cls, user_id: str, *, assistant_id: str | None = None, org_id: str | None = None
    ) -> Namespace:
        """``user_id``'s namespace (per assistant, and inside ``org_id``, when given)."""
        return namespace_of(Scope.USER, user_id=user_id, assistant_id=assistant_id, org_id=org_id)

    @classmethod
    def for_agent(cls, assistant_id: str) -> Namespace:
        return namespace_of(Scope.AGENT, assistant_id=assistant_id)

    @classmethod
    def for_org(cls, org_id: str) -> Namespace:
        return namespace_of(Scope.ORG, org_id=org_id)

    @property
    def key(self) -> str:
        if self.scope is Scope.USER:
            suffix = f":{self.assistant_id}" if self.assistant_id else ""
            within = f"{ORG_USER_PREFIX}{self.org_id}:" if self.org_id else ""
            return f"{within}user:{self.user_id}{suffix}"
        if self.scope is Scope.AGENT:
            return f"agent:{self.assistant_id}"
        return f"org:{self.org_id}"

    @classmethod
    def parse(cls, key: str) -> Namespace:
        """Inverse of :attr:`key`; raises :class:`InvalidCandidate` on a malformed key.

        Parsed once per distinct key: a worker decodes every candidate of a batch, and a
        batch is one namespace's.

        >>> Namespace.parse("user:u1:a1").assistant_id
        'a1'
        >>> Namespace.parse("org:acme:user:u1").org_id
        'acme'
        """
        if not isinstance(key, str):
            raise _malformed(key)
        return _parse_key(key)

    def __str__(self) -> str:
        return self.key


#: Namespaces seen recently, so the hot path builds each one once. Namespaces are frozen and
#: their ids validated before the lookup; 4096 covers the active users of a busy process.
NAMESPACE_CACHE_SIZE = 4096

#: What starts the key of a user namespace inside an org (``org:<org>:user:…``): the org
#: namespace's own prefix, so an org's namespaces sort and scan together; the ``:user:`` after
#: the org id tells it from the org namespace ``org:<org>`` itself (ids hold no ``:``).
ORG_USER_PREFIX: Final = "org:"


def _malformed(key: object) -> InvalidCandidate:
    return InvalidCandidate(
        f"namespace {key!r} is not one of user:<user>[:<assistant>], "
        "org:<org>:user:<user>[:<assistant>], agent:<assistant>, org:<org>"
    )


@functools.lru_cache(maxsize=NAMESPACE_CACHE_SIZE)
def _parse_key(key: str) -> Namespace:
    """:meth:`Namespace.parse` of a string key (a refused key is not cached: it raises)."""
    try:
        match key.split(":"):
            case ["user", user]:
                return Namespace.for_user(user)
            case ["user", user, assistant]:
                return Namespace.for_user(user, assistant_id=assistant)
            case ["agent", assistant]:
                return Namespace.for_agent(assistant)
            case ["org", org]:
                return Namespace.for_org(org)
            case ["org", org, "user", user]:
                return Namespace.for_user(user, org_id=org)
            case ["org", org, "user", user, assistant]:
                return Namespace.for_user(user, assistant_id=assistant, org_id=org)
    except InvalidCandidate as exc:
        raise InvalidCandidate(f"namespace {key!r}: {exc}") from None
    raise _malformed(key)


def namespace_of(scope: Scope, **ids: str | None) -> Namespace:
    """The namespace of ``scope`` with these ids, validated; built once per distinct ids."""
    for name, value in ids.items():
        if value is not None:
            validate_id(value, name)
    return _build_namespace(scope, ids.get("user_id"), ids.get("assistant_id"), ids.get("org_id"))


@functools.lru_cache(maxsize=NAMESPACE_CACHE_SIZE)
def _build_namespace(
    scope: Scope, user_id: str | None, assistant_id: str | None, org_id: str | None
) -> Namespace:
    return Namespace(scope=scope, user_id=user_id, assistant_id=assistant_id, org_id=org_id)
