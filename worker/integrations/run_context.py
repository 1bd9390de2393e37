"""Who and which run a hook is running for: one identity, plus thread and trace ids, read once.

The rule itself (what the server vouches for decides; client-written claims may repeat it,
never replace it; with orgs, the org is part of the user) lives in :mod:`worker.identity`,
which the thread scan uses too; this module reads a run's places for it.

A capture must carry the user and trace ids *explicitly*, captured while the run is still on
the stack: a timer or worker thread later would not inherit the context variables they come
from. :func:`read_run_ids` is called inside the hook and the result travels with the candidate.

**One identity.** :func:`resolve_identity` is the only place any integration (the deep-agent
helper's namespaces, the capture middleware, the summary flush, the ``remember``/``forget``
and ``search_memory``/``read_memory`` tools) learns whose memory a run touches:

- On a server that **authenticated** the run (a LangGraph server with custom auth puts the
  user in ``runtime.server_info.user`` and in ``configurable["langgraph_auth_user"]`` /
  ``["langgraph_auth_user_id"]``, keys a client cannot set), that identity is the user and
  its own claim (``org_id`` by default, a field the auth handler returns) is the
  organisation. What the run *says* — its ``context``, ``configurable`` and metadata, all
  client-written — may repeat them, never replace them: a claim naming another user or
  organisation raises :class:`~worker.errors.IdentityMismatch` and nothing is read or written.
  An identity with no organisation claim has no organisation, whatever the context says.
- With **no authentication** (an in-process agent, a server without custom auth) the run's
  claims decide, first hit wins: the context (``context={"user_id": …}`` or an object with
  that attribute), then ``configurable``, then metadata (a LangGraph server copies thread
  metadata there).

Thread id: ``runtime.execution_info.thread_id``, then ``configurable["thread_id"]``. Trace id:
the run id (``execution_info.run_id``, ``config["run_id"]``, ``configurable`` or
``metadata["run_id"]``), then the current LangSmith trace id, and only then a fresh id so the
candidate is still valid.

>>> ids = read_run_ids(None, {"configurable": {"user_id": "u1", "thread_id": "t1"},
...                          "run_id": "r1"}, user_key="user_id")
>>> (ids.user_id, ids.thread_id, ids.trace_id)
('u1', 't1', 'r1')
>>> auth = {"configurable": {"langgraph_auth_user_id": "alice", "user_id": "bob"}}
>>> try:
...     resolve_identity(None, auth)
... except IdentityMismatch as exc:
...     print(str(exc)[:72])
the run's configurable names user 'bob', but the server authenticated 'a
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from worker.errors import IdentityMismatch
from worker.identity import ORG_KEY, USER_KEY, Identity, decide

__all__ = ["ORG_KEY", "USER_KEY", "IdentityMismatch", "RunIdentity"]
#: Where a LangGraph server puts the authenticated user (the object, and its identity string)
#: in ``configurable``; it refuses these keys in a client's request and overwrites them.
AUTH_USER_KEY: Final = "langgraph_auth_user"
AUTH_USER_ID_KEY: Final = "langgraph_auth_user_id"


@dataclass(frozen=True)
class RunIds:
    """The ids of one run, captured at one moment."""

    user_id: str | None
    thread_id: str | None
    trace_id: str
    #: The user's organisation (the identity's org claim), when there is one.
    org_id: str | None = None


#: Whose memory a run touches (:class:`worker.identity.Identity`; ``authenticated``: the
#: server vouched for ``user_id``).
RunIdentity = Identity


def current_config() -> Mapping[str, Any]:
    """The running graph's config, or an empty mapping outside a graph run."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return {}


def resolve_identity(
    runtime: Any,
    config: Mapping[str, Any] | None,
    *,
    user_key: str = USER_KEY,
    org_key: str = ORG_KEY,
    user_claim: tuple[str, object] | None = None,
) -> RunIdentity:
    """The run's user and organisation (see the module docstring).

    ``user_claim`` is ``(where, value)`` from an application's own resolver (a tool's
    ``user_id_from``): without authentication it replaces the run's own user claims; with it,
    it is one more claim that must agree with the identity.
    """
    config = config or {}
    claims = _claims(runtime, config)
    identity = authenticated_identity(runtime, config)
    org_claims = list(claims(org_key).items())
    if identity is None:
        own = [user_claim] if user_claim is not None else list(claims(user_key).items())
        return decide(None, own, org_claims)
    user_id, user = identity
    user_claims = [*claims(user_key).items(), *([user_claim] if user_claim else [])]
    return decide((user_id, _text(claim_of(user, org_key))), user_claims, org_claims)


def authenticated_identity(runtime: Any, config: Mapping[str, Any]) -> tuple[str, Any] | None:
    """``(identity, user object or None)`` when the server authenticated the run, else None.

    Only server-written places count: ``runtime.server_info.user``, then ``configurable``'s
    auth user and auth user id. Metadata never authenticates: clients write thread and run
    metadata freely. An unauthenticated user (no identity) is no identity.
    """
    configurable = as_mapping(config.get("configurable"))
    server_user = getattr(getattr(runtime, "server_info", None), "user", None)
    for user in (server_user, configurable.get(AUTH_USER_KEY)):
        if user is not None and claim_of(user, "is_authenticated") is not False:
            identity = _text(claim_of(user, "identity"))
            if identity is not None:
                return identity, user
    identity = _text(configurable.get(AUTH_USER_ID_KEY))
    return (identity, None) if identity is not None else None


def claim_of(user: object, key: str) -> object:
    """``key`` of an authenticated user: an attribute, or an item (the server's user proxies
    the auth handler's dict as items; a user restored from a checkpoint is a plain dict)."""
    if user is None:
        return None
    if isinstance(user, Mapping):
        return user.get(key)
    try:
        return user[key]  # type: ignore[index]
    except (KeyError, TypeError, IndexError, AttributeError):
        pass
    try:
        return getattr(user, key, None)
    except Exception:  # a proxy that raises for unknown attributes has no such claim
        return None


def read_run_ids(
    runtime: Any, config: Mapping[str, Any] | None, *, user_key: str = USER_KEY
) -> RunIds:
    """The run's user and org (:func:`resolve_identity`; raises
    :class:`~worker.errors.IdentityMismatch`), thread and trace ids."""
    identity = resolve_identity(runtime, config, user_key=user_key)
    thread_id, trace_id = read_trace_ids(runtime, config)
    return RunIds(identity.user_id, thread_id, trace_id, identity.org_id)


def read_trace_ids(runtime: Any, config: Mapping[str, Any] | None) -> tuple[str | None, str]:
    """``(thread id or None, trace id)`` of the run."""
    config = config or {}
    configurable = as_mapping(config.get("configurable"))
    metadata = as_mapping(config.get("metadata"))
    execution = getattr(runtime, "execution_info", None)
    thread_id = _first_of(getattr(execution, "thread_id", None), configurable.get("thread_id"))
    trace_id = _first_of(
        getattr(execution, "run_id", None),
        config.get("run_id"),
        configurable.get("run_id"),
        metadata.get("run_id"),
        _langsmith_trace_id(),
    )
    return thread_id, trace_id or uuid.uuid4().hex


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` if it is a mapping (a config section), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def context_value(context: object, key: str) -> object:
    """``key`` of a run's context, whether a mapping or an object with attributes."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(key)
    return getattr(context, key, None)


def _claims(runtime: Any, config: Mapping[str, Any]) -> Callable[[str], dict[str, object]]:
    """A function: key → ``{where: value}`` of what the run itself says, in precedence order
    (context, configurable, metadata), empty values left out."""
    context = getattr(runtime, "context", None)
    configurable = as_mapping(config.get("configurable"))
    metadata = as_mapping(config.get("metadata"))

    def claims(key: str) -> dict[str, object]:
        found = {
            "context": context_value(context, key),
            "configurable": configurable.get(key),
            "metadata": metadata.get(key),
        }
        return {where: value for where, value in found.items() if _text(value) is not None}

    return claims


def _text(value: object) -> str | None:
    """A non-empty id as a string (an integer id too), or None."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _first_of(*values: object) -> str | None:
    for value in values:
        if value is not None and str(value):
            return str(value)
    return None


def _langsmith_trace_id() -> str | None:
    try:
        from langsmith.run_helpers import get_current_run_tree
    except ImportError:  # langsmith is optional for memworker
        return None
    tree = get_current_run_tree()
    return str(tree.trace_id) if tree is not None else None
