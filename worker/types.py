"""The shared vocabulary, without pydantic: constants, namespaces and their ids, the enqueue
contract, field checks, outcomes, whose memory a thread is, task names,
the queue policy and each layer's slice of the settings. Each constant is declared once, with
the reason for its value.

**Namespaces** say who a memory belongs to. A namespace is built from validated ids only, never
from free text; its ``key`` is the one string form every layer uses (Redis keys, SQL rows,
store labels).

>>> from worker.types import Namespace, normalise_path
>>> Namespace.for_user("u1", assistant_id="support-bot").key
'user:u1:support-bot'
>>> Namespace.parse("agent:support-bot").scope.value
'agent'
>>> Namespace.for_user("alice", assistant_id="bot", org_id="acme").key
'org:acme:user:alice:bot'
>>> normalise_path("work/projects")
'/memories/work/projects.md'

**Field checks** say what each field of a candidate may hold. The hot path
(:func:`worker.models.make_candidate`) and the :class:`~worker.models.Candidate` model's
validators (the queue decoding its log) both call them, so a log entry decodes only if the hot
path could have written it.

>>> validate_kind("turn"), validate_key("preference.language")
(<Kind.TURN: 'turn'>, 'preference.language')

**The enqueue contract**: what every ``enqueue`` takes (:class:`EnqueueFields`) and how it is
checked (:func:`validate_enqueue`); the queue stores a :class:`worker.models.Candidate` built
from the checked values.

>>> v = validate_enqueue({"user_id": "u1", "trace_id": "t1", "text": " I prefer tea "})
>>> (v.namespace.key, v.stored["text"], v.stored["kind"].value)
('user:u1', 'I prefer tea', 'fact')

**Outcomes.** Every use case that consolidates, previews or reconciles a namespace reports one
:class:`Outcome`. :data:`MEANINGS` is the single place that says, per outcome, what the ``runs``
table records and whether work was left undone, which the metrics, the CLI's exit code and the
Celery result all read.

>>> Outcome.COMMITTED.run_outcome, Outcome.COMMITTED.undone
('ok', False)
>>> Outcome.DEAD.run_outcome, Outcome.DEAD.undone
('failed', True)
>>> Outcome.PREVIEWED.run_outcome is None  # a preview writes no run row
True

**Whose memory it is.** Runs (capture middleware, memory and search tools, the deep-agent
helper), thread scans, the inbox and agents' edits all decide a user by one rule:

- **What the server vouches for decides.** For a run, the identity an authenticating LangGraph
  server puts in it (:mod:`worker.integrations.capture` reads it); for a scanned thread, the
  owner recorded in its metadata by the server's auth handler or the chat service
  (:func:`thread_owner`). Its organisation claim, if any, is the organisation.
- **What a client writes may repeat it, never replace it.** A claim in a run's context,
  ``configurable`` or metadata, or in a thread's own ``user_id``/``org_id`` metadata, that
  names another user or organisation raises :class:`~worker.errors.IdentityMismatch`, and
  nothing is read or filed.
- **With orgs, the org is part of the user**: the same user id in two organisations is two
  people, so :meth:`Identity.user_namespace` is ``org:<org>:user:<user>[:<assistant>]``.
  Without an org it is ``user:<user>[:<assistant>]``, so a deployment without orgs must keep
  its user ids unique.

>>> decide(("alice", "acme"), [("metadata", "alice")], []).user_namespace("bot").key
'org:acme:user:alice:bot'
>>> thread_owner({"owner": "alice", "user_id": "bob"}, owner_key="owner")
Traceback (most recent call last):
...
worker.errors.IdentityMismatch: the thread's metadata names user 'bob', but its owner is 'alice'; a thread is filed only under its owner's memory, so nothing was filed. Leave user_id out of the metadata, or write the owner's id there

**Task and queue names.** Queue names carry the deployment's key prefix
(``MEMWORKER_KEY_PREFIX``), so two deployments sharing one broker never consume each other's
tasks:

>>> queue_name("mw", SWEEP_LANE), queue_name("acme", DELIVER_LANE)
('mw.sweep', 'acme.deliver')

**The queue policy** (:class:`QueuePolicy`). The workers write it into every shard's ``policy``
hash (from :attr:`worker.settings.Settings.queue_policy`), and every script reads it through
``_lib.lua``'s ``policy_of``: one hash field per field here, by the same name and in the same
order (checked when the scripts are loaded). Scripts carry no defaults of their own: a script
that reads the policy is also sent a copy (:meth:`QueuePolicy.packed`), used only for fields no
worker has written yet (a fresh or emptied Redis). The workers send their own policy; a chat
host's client sends :meth:`QueuePolicy.defaults`, never its own settings, so nothing a client is
configured with changes when a namespace is due. The debounce formula is ``_lib.lua``'s
``due_at``: due ``quiet`` ms after the last arrival, but no later than ``max_wait`` ms after
the first. A new knob is a field here (with its release default), its setting on ``Settings``
and its use in ``_lib.lua``.

>>> policy = QueuePolicy(quiet=5000, shards=4)
>>> policy.pairs()
['quiet', 5000, 'max_wait', 300000, 'max_pending', 10000, 'shards', 4]
>>> struct.unpack(">4d", policy.packed())
(5000.0, 300000.0, 10000.0, 4.0)
>>> QueuePolicy.defaults(shards=16).quiet
30000

**Settings slices**: a frozen view of the fields one layer reads (see :mod:`worker.settings`).
Each field has the name of the :class:`~worker.settings.Settings` attribute it copies, so one
function builds every slice and a test holds each name to ``Settings``; defaults and bounds
live on ``Settings`` alone.

**Lazy exports** (PEP 562): ``import worker`` must stay cheap for a chat service that only wants
the client, and the client must not load the worker's queue, so each package's public names
resolve on first access (:func:`lazy_exports`).

>>> getattr_ = lazy_exports("worker.queue", {"MemoryClient": "worker.queue.client"})
>>> getattr_("MemoryClient").__name__
'MemoryClient'
>>> getattr_("Nope")
Traceback (most recent call last):
AttributeError: module 'worker.queue' has no attribute 'Nope'
"""  # noqa: E501

from __future__ import annotations

import functools
import importlib
import re
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import (
    Any,
    Final,
    Literal,
    NamedTuple,
    NotRequired,
    TypedDict,
    get_args,
    get_origin,
    get_type_hints,
)

from worker.errors import IdentityMismatch, InvalidCandidate, StoreRefused, UnknownOwner

__all__ = [
    "ENQUEUE_FIELDS",
    "REQUIRED_ENQUEUE_FIELDS",
    "ConsolidationSettings",
    "EnqueueFields",
    "EnqueueValues",
    "LaneSettings",
    "QueueSettings",
    "SinkSettings",
    "SourceSettings",
    "StoreSettings",
    "StructuredMethod",
    "candidate_id_for",
    "validate_enqueue",
]


#: IDs (users, assistants, orgs, threads, traces) are restricted to a safe alphabet so they can
#: be embedded in Redis keys, SQL rows and LangGraph store labels without escaping, and never
#: contain a ``{``/``}`` (which would break Redis Cluster hash tags) or a path separator.
ID_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@\-]{0,127}$")

#: Longest accepted id; 128 characters fits UUIDs, e-mail addresses and provider thread ids.
MAX_ID_LENGTH: Final = 128

#: Every memory file lives under this route, the way a deepagents ``StoreBackend`` is mounted.
MEMORY_ROUTE: Final = "/memories/"

#: The inbox route's default: agents write there freely and the inbox scan removes each item
#: once merged, so a file memworker wrote there would be deleted from the store by the next scan.
INBOX_ROUTE: Final = MEMORY_ROUTE + "inbox/"

#: Path prefixes no enqueue topic, plan, ``put`` or import may fall under (the deployment's own
#: inbox route is added where settings are at hand); checked by :func:`reserved_prefix`.
RESERVED_PREFIXES: Final = (INBOX_ROUTE,)

#: How far a candidate's ``occurred_at`` may lie after its ``created_at``: a few minutes of
#: clock skew; more is a wrong time zone or a made-up time, refused so that a future event time
#: cannot win every merge.
MAX_OCCURRED_AT_SKEW: Final = timedelta(minutes=5)

#: Largest candidate text in UTF-8 bytes unless the deployment sets ``MEMWORKER_MAX_TEXT_BYTES``
#: (the one default every entry point, source and consolidator falls back on): a conversation
#: exchange of a few paragraphs fits; one candidate cannot fill a prompt or a stream entry.
MAX_TEXT_BYTES: Final = 8192

#: Longest normalised memory path; long enough for nested topics, short enough for an index.
MAX_PATH_LENGTH: Final = 200

#: Topic/path segments: lower-case-friendly names; no dots at the start, so no ``..`` traversal.
PATH_SEGMENT_PATTERN: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-.]{0,63}$")

#: A ``key`` names a slot such as ``preference.language`` for deterministic supersession.
KEY_PATTERN: Final = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,99}$")

#: Namespace UUID for deterministic candidate ids (uuid5 over namespace + idempotency key), so
#: a retried capture with the same key yields the same id and the ledger dedupes it.
CANDIDATE_ID_NAMESPACE: Final = "6f1c1f47-3b7e-4a8e-9d55-8f2b0d6a7c11"

#: Default memory files the rules consolidator routes to.
PREFERENCES_PATH: Final = "/memories/preferences.md"
FACTS_PATH: Final = "/memories/facts.md"

# --- the settings the hot-path client reads -----------------------------------------------------
# Declared here, below both :class:`worker.settings.Settings` and the client's own slice
# (:class:`worker.queue.client.ClientSettings`), so the two share every default and bound.

#: The prefix of every environment variable memworker reads (``MEMWORKER_REDIS_URL``, …).
ENV_PREFIX: Final = "MEMWORKER_"

#: Where ``memworker run`` keeps its embedded Redis socket, SQLite file and files sink by default.
DEFAULT_DATA_DIR: Final = Path.home() / ".memworker"

#: The embedded Redis server's Unix socket, inside the data directory.
EMBEDDED_REDIS_SOCKET_NAME: Final = "redis.sock"

#: The default key prefix, and what a prefix may be: it is embedded in every Redis key (and in
#: Celery queue names), so it has the ids' safe alphabet and a short length.
DEFAULT_KEY_PREFIX: Final = "mw"
KEY_PREFIX_PATTERN: Final = r"^[A-Za-z0-9_\-]{1,32}$"

#: Default and bounds of the queue's shard count (see ``Settings.queue_shards``).
DEFAULT_QUEUE_SHARDS: Final = 256
MAX_QUEUE_SHARDS: Final = 1024

#: Bounds of ``MEMWORKER_MAX_TEXT_BYTES``: a few words at least, a stream entry of 1 MiB at most.
MIN_TEXT_BYTES_LIMIT: Final = 16
MAX_TEXT_BYTES_LIMIT: Final = 1_048_576

#: The hot path's default Redis timeout (a chat reply never waits longer on Redis), and the
#: largest one accepted.
DEFAULT_SOCKET_TIMEOUT_SECONDS: Final = 0.25
MAX_SOCKET_TIMEOUT_SECONDS: Final = 30.0

#: ``maxmemory-policy`` values that may evict keys without a TTL, i.e. the queue's own keys:
#: the workers refuse to start on them and the hot path to enqueue. ``volatile-*`` only evicts
#: keys with an expiry, and no queue key has one.
EVICTING_POLICIES: Final = frozenset({"allkeys-lru", "allkeys-lfu", "allkeys-random"})

# --- bounds on what agents write (checked before any work on it) --------------------------------
# An agent writes freely (its inbox, and with direct edits the published files), so a runaway
# loop or a pasted dump must cost a bounded amount: each item is measured against these bounds
# and refused or set aside before a single line of it is parsed.

#: Most lines one inbox item may hold: an agent writes a few facts per thread; a file of
#: thousands of lines is a dump (or a runaway loop) that would fill its user's backlog.
MAX_INBOX_ITEM_LINES: Final = 1000

#: Largest inbox item in UTF-8 bytes: its line bound at about 256 bytes a line, so a few long
#: lines cannot carry a megabyte either.
MAX_INBOX_ITEM_BYTES: Final = 262_144

#: Most lines an agent's direct edit of a memory file may hold: a published file is rendered
#: under its budget (about a hundred entries by default), so an edit ten times that is a dump;
#: it is recorded and memworker's version restored (never merged).
MAX_EDIT_LINES: Final = 1000

#: Largest direct edit in UTF-8 bytes, for the same reason (its line bound at 256 bytes a line).
MAX_EDIT_BYTES: Final = 262_144

#: The embeddings a deployment gets without a setting: the multilingual model shipped in the
#: default install, so merging decides by meaning and search is hybrid out of the box.
DEFAULT_EMBEDDINGS: Final = "local:multilingual-e5-small"
#: What turns embeddings off (``MEMWORKER_EMBEDDINGS=none``): merging and search by words only.
NO_EMBEDDINGS: Final = "none"


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
    """The reserved prefix (:data:`~worker.types.RESERVED_PREFIXES`, plus ``extra``) that
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

    ``key`` is the canonical string form used in Redis keys and SQL rows; a user namespace
    inside an org is keyed ``org:<org>:user:<user>[:<assistant>]`` (see the module docstring).
    The ids and the scope's rules are checked on construction; a bad one raises
    :class:`InvalidCandidate`.
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

#: The valid ``source`` values; checked at enqueue, since a candidate is built without
#: validation (``model_construct``) and a bad value would otherwise only fail when the worker
#: decodes the batch.
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
    so is one more than :data:`~worker.types.MAX_OCCURRED_AT_SKEW` after ``created_at``
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


class EnqueueFields(TypedDict):
    """The enqueue contract: the keyword arguments of every ``enqueue``, declared once.

    ``MemoryClient.enqueue`` / ``AsyncMemoryClient.enqueue`` take them as keywords
    (``**fields: Unpack[EnqueueFields]``), ``enqueue_many`` as one dict per candidate, and
    :func:`~worker.models.make_candidate` validates them. Adding a field is one line here
    plus its check in :func:`validate_enqueue`; one the candidate stores is also an entry of
    ``stored`` there and a field of :class:`~worker.models.Candidate`, and nothing else.

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
    #: to ``org:<org>:user:<user>[:<assistant>]``.
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

    ``stored`` holds the :class:`~worker.models.Candidate` fields but its id and creation
    time, by name and as stored, and :func:`~worker.models.build_candidate` takes these values
    as they are.
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
    :func:`candidate_id_for` makes). ``now`` is the candidate's creation time,
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


#: What a row of the ``runs`` table records as a run's outcome.
RunOutcome = Literal["ok", "failed", "stale"]

#: The valid ``runs.outcome`` values; the store checks every row it writes against them.
RUN_OUTCOMES: Final = frozenset(get_args(RunOutcome))


class Outcome(StrEnum):
    """What one attempt on one namespace did (values are stable: logs, JSON, metric labels)."""

    COMMITTED = "committed"  #: a new version was committed
    NOTHING_NEW = "nothing_new"  #: every candidate was already applied; acknowledged only
    PREVIEWED = "dry_run"  #: a preview found changes; nothing was written
    STALE = "stale"  #: another batch committed first; given back untouched, retried
    FAILED = "failed"  #: the batch failed; it stays pending and is retried
    DEAD = "dead"  #: the batch failed once too often and was dead-lettered now
    NOTHING_PENDING = "nothing_pending"  #: nothing was queued for the namespace
    LEASED = "leased"  #: a worker holds the namespace; it was left to that worker
    DEAD_LETTERED = "dead_lettered"  #: already dead-lettered; waits for `memworker dlq retry`

    @property
    def run_outcome(self) -> RunOutcome | None:
        """What the ``runs`` table records for this outcome (None: no run row)."""
        return MEANINGS[self].run_outcome

    @property
    def undone(self) -> bool:
        """True when work is left undone: a failure for metrics, exit code 1 for the CLI."""
        return MEANINGS[self].undone


@dataclass(frozen=True)
class Meaning:
    """What an outcome stands for outside the use case that reported it."""

    run_outcome: RunOutcome | None
    undone: bool


MEANINGS: Final[dict[Outcome, Meaning]] = {
    Outcome.COMMITTED: Meaning("ok", undone=False),
    Outcome.NOTHING_NEW: Meaning(None, undone=False),
    Outcome.PREVIEWED: Meaning(None, undone=False),
    Outcome.STALE: Meaning("stale", undone=True),
    Outcome.FAILED: Meaning("failed", undone=True),
    Outcome.DEAD: Meaning("failed", undone=True),
    Outcome.NOTHING_PENDING: Meaning(None, undone=False),
    Outcome.LEASED: Meaning(None, undone=False),
    Outcome.DEAD_LETTERED: Meaning(None, undone=True),
}


#: Default keys naming the user and the organisation in what a client writes (a run's context,
#: ``configurable`` and metadata; a thread's metadata).
USER_KEY: Final = "user_id"
ORG_KEY: Final = "org_id"
#: The thread-metadata key that names a thread's owner by default: where LangGraph's documented
#: owner-only auth handler records the authenticated identity (``metadata["owner"] =
#: ctx.user.identity``), overwriting what the client sent. The server itself records no owner:
#: without such a handler (or a chat service that alone writes the field), a thread has none.
OWNER_KEY: Final = "owner"

#: ``(where, value)``: one client-written claim of a user or org id.
Claim = tuple[str, object]


@dataclass(frozen=True)
class Identity:
    """Whose memory it is. ``authenticated``: a server vouched for ``user_id`` (and
    ``org_id``), rather than a client's claim."""

    user_id: str | None
    org_id: str | None
    authenticated: bool

    def user_namespace(self, assistant_id: str | None = None) -> Namespace:
        """The user's namespace, inside the org when there is one; :class:`InvalidCandidate`
        (from the ids' check) when there is no user or an id is malformed."""
        return Namespace.for_user(self.user_id or "", assistant_id=assistant_id, org_id=self.org_id)


def decide(
    vouched: tuple[str, str | None] | None,
    user_claims: Sequence[Claim],
    org_claims: Sequence[Claim],
    *,
    subject: str = "run",
) -> Identity:
    """The identity: ``vouched`` ``(user, org)`` when a server vouched for one, every claim
    checked against it; else the first user claim and the first org claim.

    Raises :class:`IdentityMismatch` for a claim naming another user or org than the vouched
    one; ``subject`` (``run`` or ``thread``) words the message.
    """
    if vouched is None:
        return Identity(_first(user_claims), _first(org_claims), authenticated=False)
    user_id, org_id = vouched
    _refuse_other("user", user_id, user_claims, subject)
    _refuse_other("organisation", org_id, org_claims, subject)
    return Identity(user_id, org_id, authenticated=True)


def thread_owner(
    metadata: Mapping[str, object],
    *,
    owner_key: str = OWNER_KEY,
    org_key: str | None = None,
    user_key: str = USER_KEY,
    claimed_org_key: str = ORG_KEY,
) -> Identity:
    """The owner of a scanned thread, from ``metadata[owner_key]`` (and its org from
    ``metadata[org_key]`` when the deployment names one) — fields only the server's auth
    handler (or the chat service) writes. The thread's own ``user_key``/``claimed_org_key``
    metadata is client-written: it may repeat the owner, never replace it.

    Raises :class:`UnknownOwner` when the owner (or, with ``org_key``, the org) is missing or
    not a valid id, and :class:`IdentityMismatch` when the client's claims name someone else.
    """
    owner = id_text(metadata.get(owner_key))
    if owner is None:
        raise UnknownOwner(
            f"the thread's metadata has no {owner_key!r} (the owner its server's auth handler "
            "records); its owner cannot be established, so nothing was filed. Record the "
            f"owner under {owner_key!r} on every thread, or set MEMWORKER_THREAD_OWNER_KEY"
        )
    org = id_text(metadata.get(org_key)) if org_key else None
    if org_key and org is None:
        raise UnknownOwner(
            f"the thread's metadata has no {org_key!r} (its owner's organisation); nothing "
            f"was filed. Record the org under {org_key!r} on every thread"
        )
    for value, what in ((owner, owner_key), (org, org_key)):
        try:
            if value is not None:
                validate_id(value, str(what))
        except InvalidCandidate as exc:
            raise UnknownOwner(
                f"the thread's owner is no valid id ({exc}); nothing was filed"
            ) from None
    user_claims = [("metadata", v)] if (v := metadata.get(user_key)) is not None else []
    org_claims = (
        [("metadata", v)]
        if org_key != claimed_org_key and (v := metadata.get(claimed_org_key)) is not None
        else []
    )
    return decide((owner, org), user_claims, org_claims, subject="thread")


def _refuse_other(what: str, decided: str | None, claims: Sequence[Claim], subject: str) -> None:
    """:class:`IdentityMismatch` for the first claim naming another ``what`` than decided."""
    for where, value in claims:
        claimed = id_text(value)
        if claimed is not None and claimed != decided:
            raise _mismatch(what, claimed, decided, where, subject)


def _mismatch(
    what: str, claimed: str, decided: str | None, where: str, subject: str
) -> IdentityMismatch:
    if subject == "run":
        vouched = f"authenticated {decided!r}" if decided else f"vouched for no {what}"
        return IdentityMismatch(
            f"the run's {where} names {what} {claimed!r}, but the server {vouched}; an "
            f"authenticated run reads and writes only its own {what}'s memory, so nothing was "
            f"read or written. Pass no {what} id in the run, or the authenticated one"
        )
    owner = f"its owner is {decided!r}" if decided else f"its owner has no {what}"
    field = "user_id" if what == "user" else "org_id"
    return IdentityMismatch(
        f"the {subject}'s {where} names {what} {claimed!r}, but {owner}; a {subject} is filed "
        f"only under its owner's memory, so nothing was filed. Leave {field} out of the "
        f"{where}, or write the owner's id there"
    )


def _first(claims: Sequence[Claim]) -> str | None:
    for _where, value in claims:
        text = id_text(value)
        if text is not None:
            return text
    return None


def id_text(value: object) -> str | None:
    """A non-empty id as a string (an integer id too), or None.

    >>> id_text(42), id_text(""), id_text(True), id_text("u1")
    ('42', None, None, 'u1')
    """
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


#: The sweep lane: short tasks that claim due namespaces and dispatch them, and scheduled runs
#: (coordinators that enqueue and drain). Kept apart from merges and deliveries so a long LLM
#: call or a hung sink never delays a claim.
SWEEP_LANE: Final = "sweep"
#: The consolidate lane: one task per claimed namespace batch.
CONSOLIDATE_LANE: Final = "consolidate"
#: The deliver lane: outbox passes that publish committed versions to the sinks. A sink that
#: hangs holds only this lane's threads.
DELIVER_LANE: Final = "deliver"

SWEEP_TASK: Final = "memworker.sweep"
CONSOLIDATE_TASK: Final = "memworker.consolidate"
DELIVER_TASK: Final = "memworker.deliver_outbox"
SCHEDULED_RUN_TASK: Final = "memworker.scheduled_run"


def queue_name(key_prefix: str, lane: str) -> str:
    """The Celery queue (and exchange) of ``lane`` for the deployment ``key_prefix``."""
    return f"{key_prefix}.{lane}"


#: The release's quiet period (ms): a burst of turns in one conversation becomes one batch.
DEFAULT_QUIET_MS: Final = 30_000
#: The release's cap on debouncing (ms): a chatty user who never pauses still gets consolidated.
DEFAULT_MAX_WAIT_MS: Final = 300_000
#: The release's backlog limit per namespace: one runaway client cannot fill Redis.
DEFAULT_MAX_PENDING: Final = 10_000


@dataclass(frozen=True)
class QueuePolicy:
    """One deployment's debounce and backlog limit, as the scripts read them (ms, counts)."""

    #: Quiet period (ms): a namespace is due this long after its last arrival...
    quiet: int = DEFAULT_QUIET_MS
    #: ...but at most this long (ms) after its first pending arrival.
    max_wait: int = DEFAULT_MAX_WAIT_MS
    #: Enqueue refuses a namespace's candidate past this many pending (BacklogFull).
    max_pending: int = DEFAULT_MAX_PENDING
    #: The shard count the workers lay the queue out in; every enqueue checks the client's.
    #: No release default here: it is the deployment's layout (``Settings.queue_shards``).
    shards: int = field(kw_only=True)

    @classmethod
    def defaults(cls, shards: int) -> QueuePolicy:
        """The release's default policy for a queue of ``shards`` shards: what a client sends
        for the scripts to use until a worker has written the deployment's."""
        return cls(shards=shards)

    def pairs(self) -> list[str | int]:
        """Field/value pairs, as the hash stores them."""
        names = [f.name for f in fields(self)]
        return [item for pair in zip(names, astuple(self), strict=True) for item in pair]

    def packed(self) -> bytes:
        """The values in field order as big-endian doubles: the ``policy`` script argument.
        One argument a script reads without parsing (``struct.unpack`` where needed), since
        every argument and every string a script parses costs the hot path's enqueue."""
        values = astuple(self)
        return struct.pack(f">{len(values)}d", *values)


# Secrets (an API key, a provider's keyword arguments) are kept out of a slice's repr, so a
# logged slice never carries one.

#: How the LLM agent asks for its structured plan (see ``Settings.model_structured_method``).
StructuredMethod = Literal["auto", "function_calling", "json_schema", "json_mode"]


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """The queue's slice: its keys, the debounce policy, leases, retries and batch sizes.

    >>> from worker.settings import Settings
    >>> Settings(debounce_seconds=5).for_queue.queue_policy.quiet
    5000
    """

    key_prefix: str
    queue_shards: int
    #: The debounce and backlog policy (``debounce_seconds``, ``max_wait_seconds``,
    #: ``max_pending_per_namespace`` and ``queue_shards``), as the scripts read it.
    queue_policy: QueuePolicy
    lease_seconds: float
    max_attempts: int
    retry_backoff_seconds: float
    outage_retry_max_seconds: float
    max_batch: int
    claim_limit: int
    allow_evicting_redis: bool


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """The memory store's slice: where it is, its deadlines, its search index.

    >>> from worker.settings import Settings
    >>> Settings(data_dir="/srv/mw").for_store.effective_database_url
    'sqlite:////srv/mw/memworker.sqlite3'
    """

    effective_database_url: str
    database_connect_timeout_seconds: float
    database_timeout_seconds: float
    text_search_config: str
    embeddings: str | None
    embeddings_timeout_seconds: float


@dataclass(frozen=True, slots=True)
class ConsolidationSettings:
    """The consolidator's slice: which one, its model, and the limits every plan is held to.

    >>> from worker.settings import Settings
    >>> Settings().for_consolidation.consolidator
    'worker.consolidation.rules:RulesConsolidator'
    """

    consolidator: str
    model: str | None
    model_token_budget: int
    model_structured_method: StructuredMethod
    model_base_url: str | None
    model_kwargs: Mapping[str, Any] = field(repr=False)
    model_timeout_seconds: float
    max_merge_seconds: float
    max_removals_per_run: int
    max_text_bytes: int
    file_budget_bytes: int
    sensitive_paths: Sequence[str]
    inbox_route: str


@dataclass(frozen=True, slots=True)
class SinkSettings:
    """The sinks' slice: which sinks, where they write, and the store layout they publish in.

    >>> from worker.settings import Settings
    >>> Settings().for_sinks.sinks
    ['files']
    """

    sinks: Sequence[str]
    effective_files_dir: Path
    langgraph_url: str | None
    langgraph_api_key: str | None = field(repr=False)
    sink_timeout_seconds: float
    store_namespace: tuple[str, ...]
    store_namespace_agent: tuple[str, ...]
    store_namespace_org: tuple[str, ...]
    store_routes: Mapping[str, str]
    inbox_route: str
    direct_edits: bool


@dataclass(frozen=True, slots=True)
class SourceSettings:
    """The sources' slice: the LangGraph server whose threads are scanned, and how.

    >>> from worker.settings import Settings
    >>> Settings(thread_assistant_key="graph_id").for_sources.thread_assistant_key
    'graph_id'
    """

    langgraph_url: str | None
    langgraph_api_key: str | None = field(repr=False)
    thread_assistant_key: str | None
    max_text_bytes: int
    thread_owner_key: str = "owner"
    thread_org_key: str | None = None


@dataclass(frozen=True, slots=True)
class LaneSettings:
    """The task lanes' slice (Celery and beat): the broker, queue names, beat's timing.

    >>> from worker.settings import Settings
    >>> Settings(key_prefix="chat").for_lanes.key_prefix
    'chat'
    """

    key_prefix: str
    broker_url: str | None
    sweep_interval_seconds: float
    beat_lock_seconds: float
    schedules_dir: Path | None


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``homes`` read from the module
    it maps to, imported then; any other name an ``AttributeError``, as for a missing one."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


def require_utc(value: datetime, what: str) -> datetime:
    """Return ``value`` in UTC; a naive datetime is refused because its zone is a guess.

    >>> from datetime import UTC, datetime
    >>> require_utc(datetime(2025, 1, 1, tzinfo=UTC), "now").isoformat()
    '2025-01-01T00:00:00+00:00'
    """
    if not isinstance(value, datetime):
        raise StoreRefused(f"{what} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise StoreRefused(
            f"{what} is a naive datetime ({value.isoformat()}); pass a timezone-aware one, "
            "e.g. datetime.now(UTC)"
        )
    return value.astimezone(UTC)
