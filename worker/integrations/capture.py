"""Capturing conversations from inside a LangChain agent: the run's identity, and a client call
that never fails the chat.

:class:`Enqueuer` / :class:`AsyncEnqueuer` are the ``enqueue`` signature of
``MemoryClient`` / ``AsyncMemoryClient``: keyword arguments
:class:`~worker.models.EnqueueFields`, declared once. Anything with that method works (a test
double, a client wrapper that adds tenancy checks, …).

:func:`submit` and :func:`asubmit` are the one place an integration hands a candidate over. A
capture is a side effect of a chat reply, so they never raise: queue trouble is logged (the
error class and the user id, never the text) and counted in :data:`CAPTURE_ERRORS`, and the
reply goes on.

>>> class Printer:
...     def enqueue(self, *, user_id, trace_id, text, **kw):
...         print(user_id, trace_id, text)
...         return "c1"
>>> submit(Printer(), "capture", user_id="u1", trace_id="t1", text="hi")
u1 t1 hi
'c1'

A capture must carry the user and trace ids *explicitly*, read by :func:`read_run_ids` inside
the hook while the run is still on the stack: a timer or worker thread later would not inherit
the context variables they come from.

**One identity.** :func:`resolve_identity` is the only place any integration (the deep-agent
helper's namespaces, the capture middleware, the summary flush, the ``remember``/``forget``
and ``search_memory``/``read_memory`` tools) learns whose memory a run touches, by the rule of
:mod:`worker.types` that the thread scan follows too:

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

:class:`MemoryCaptureMiddleware` goes into ``create_agent(middleware=[...])`` (or a deep
agent's ``middleware``). After each agent run it enqueues ONE ``turn`` candidate: the run's
last user input and its final assistant reply, never tool calls or tool results.
:func:`make_memory_tools` gives the model ``remember`` and ``forget`` tools that enqueue
``fact`` / ``forget`` candidates. Consolidation decides what is stored, and neither ever raises
into the agent.

>>> from langchain.agents import create_agent                       # doctest: +SKIP
>>> from worker.queue.client import MemoryClient                  # doctest: +SKIP
>>> client = MemoryClient.from_url("redis://127.0.0.1:6379/0")      # doctest: +SKIP
>>> agent = create_agent(                                           # doctest: +SKIP
...     model,
...     tools=make_memory_tools(client),
...     middleware=[MemoryCaptureMiddleware(client)],
... )
>>> agent.invoke({"messages": [("user", "I prefer tea")]},          # doctest: +SKIP
...              {"configurable": {"user_id": "u1", "thread_id": "t1"}})
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import Runtime
from prometheus_client import Counter
from typing_extensions import Unpack

from worker.errors import IdentityMismatch
from worker.models import EnqueueFields, split_exchanges
from worker.types import MAX_TEXT_BYTES, ORG_KEY, USER_KEY, Identity, decide, id_text

__all__ = ["ORG_KEY", "USER_KEY", "IdentityMismatch", "RunIdentity"]


logger = logging.getLogger(__name__)

#: Failed hand-overs from the chat service's integrations to the queue, by integration and
#: error class. A rising count means memories are being lost on the hot path (Redis down,
#: backlog full, invalid ids); the chat replies themselves were not affected.
CAPTURE_ERRORS = Counter(
    "memworker_capture_errors_total",
    "Candidates an integration (capture middleware, summary flush, memory tools) could not "
    "enqueue; the chat reply went on without them.",
    ["integration", "error"],
)


@runtime_checkable
class Enqueuer(Protocol):
    """The hot-path client's synchronous ``enqueue``; returns the candidate id."""

    def enqueue(self, **fields: Unpack[EnqueueFields]) -> str: ...


@runtime_checkable
class AsyncEnqueuer(Protocol):
    """The hot-path client's asynchronous ``enqueue``; returns the candidate id."""

    async def enqueue(self, **fields: Unpack[EnqueueFields]) -> str: ...


def is_async(enqueuer: Enqueuer | AsyncEnqueuer) -> bool:
    """True when ``enqueuer.enqueue`` is a coroutine function."""
    return inspect.iscoroutinefunction(enqueuer.enqueue)


def submit(
    enqueuer: Enqueuer | AsyncEnqueuer, integration: str, **args: Unpack[EnqueueFields]
) -> str | None:
    """Enqueue from synchronous code; the candidate id, or ``None`` after logging and counting.

    An async-only enqueuer cannot be awaited from a synchronous run; that is reported the same
    way (give the integration a synchronous client too, or run the agent asynchronously).
    """
    if is_async(enqueuer):
        _report(integration, "AsyncEnqueuerInSyncRun", args)
        return None
    try:
        return str(enqueuer.enqueue(**args))
    except Exception as exc:  # never into the agent: a lost capture must not lose the reply
        _report(integration, type(exc).__name__, args)
        return None


async def asubmit(
    enqueuer: Enqueuer | AsyncEnqueuer, integration: str, **args: Unpack[EnqueueFields]
) -> str | None:
    """Enqueue from async code; a synchronous enqueuer runs in a worker thread so the event
    loop is never blocked on a Redis round trip."""
    try:
        if isinstance(enqueuer, AsyncEnqueuer) and is_async(enqueuer):
            result: Any = await enqueuer.enqueue(**args)
        else:
            result = await asyncio.to_thread(lambda: enqueuer.enqueue(**args))
        return str(result)
    except Exception as exc:  # never into the agent: a lost capture must not lose the reply
        _report(integration, type(exc).__name__, args)
        return None


def report_refused(integration: str, exc: Exception) -> None:
    """Count and log a capture refused before anything was enqueued (e.g. a run naming another
    user than the authenticated one): the same counter, so one alert covers both."""
    CAPTURE_ERRORS.labels(integration=integration, error=type(exc).__name__).inc()
    logger.warning(
        "memory capture refused: integration=%s error=%s: %s",
        integration,
        type(exc).__name__,
        exc,
    )


def _report(integration: str, error: str, args: EnqueueFields) -> None:
    CAPTURE_ERRORS.labels(integration=integration, error=error).inc()
    # Ids only: candidate text is user content and may hold anything.
    logger.warning(
        "memory capture dropped: integration=%s error=%s user_id=%s thread_id=%s kind=%s",
        integration,
        error,
        args.get("user_id"),
        args.get("thread_id"),
        args.get("kind", "fact"),
    )


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


#: Whose memory a run touches (:class:`worker.types.Identity`; ``authenticated``: the
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
    return decide((user_id, id_text(claim_of(user, org_key))), user_claims, org_claims)


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
            identity = id_text(claim_of(user, "identity"))
            if identity is not None:
                return identity, user
    identity = id_text(configurable.get(AUTH_USER_ID_KEY))
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
        return {where: value for where, value in found.items() if id_text(value) is not None}

    return claims


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


#: Label of this integration in logs and in the capture-error counter.
CAPTURE_INTEGRATION = "capture_middleware"
TOOLS_INTEGRATION = "memory_tools"

#: Default key naming the user in the run's context / ``configurable`` / metadata.
DEFAULT_USER_KEY = USER_KEY


class MemoryCaptureMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Enqueue the run's last exchange as one ``turn`` candidate after every agent run.

    Args:
        enqueuer: the hot-path client (``MemoryClient`` or ``AsyncMemoryClient``). A synchronous
            client also serves async runs (in a worker thread); an async-only client serves only
            async runs (a synchronous run logs and counts the skipped capture).
        user_key: the key naming the user in the run's context, ``configurable`` or metadata.
        assistant_id: puts the memories in the per-assistant user namespace
            ``user:<user>:<assistant_id>``; use the same value in the thread-scan source so
            both produce the same candidate ids for the same exchange.
        max_text_bytes: the rendered exchange is shortened to this many bytes.

    The idempotency key is ``thread:<thread_id>:<final message id>``: a retried run that
    produced the same final message enqueues a candidate with the same id, and the ledger keeps
    one. Without a thread id (an agent without a checkpointer) the candidate id is random.
    """

    def __init__(
        self,
        enqueuer: Enqueuer | AsyncEnqueuer,
        *,
        user_key: str = DEFAULT_USER_KEY,
        assistant_id: str | None = None,
        max_text_bytes: int = MAX_TEXT_BYTES,
    ) -> None:
        super().__init__()
        self.enqueuer = enqueuer
        self.user_key = user_key
        self.assistant_id = assistant_id
        self.max_text_bytes = max_text_bytes

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        args = self._candidate(state, runtime)
        if args is not None:
            submit(self.enqueuer, CAPTURE_INTEGRATION, **args)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        args = self._candidate(state, runtime)
        if args is not None:
            await asubmit(self.enqueuer, CAPTURE_INTEGRATION, **args)
        return None

    def _candidate(self, state: Mapping[str, Any], runtime: Runtime[Any]) -> EnqueueFields | None:
        """The enqueue arguments for this run's last exchange, or ``None`` if there is none."""
        exchanges = split_exchanges(state.get("messages") or [])
        if not exchanges or not exchanges[-1].complete:
            # No final reply (interrupted, or ended on a tool call): nothing to remember yet.
            return None
        last = exchanges[-1]
        try:
            ids = read_run_ids(runtime, current_config(), user_key=self.user_key)
        except IdentityMismatch as exc:  # another user's memory: refused, counted, reply goes on
            report_refused(CAPTURE_INTEGRATION, exc)
            return None
        return EnqueueFields(
            user_id=ids.user_id,
            trace_id=ids.trace_id,
            text=last.render(self.max_text_bytes),
            kind="turn",
            assistant_id=self.assistant_id,
            thread_id=ids.thread_id,
            idempotency_key=last.idempotency_key(ids.thread_id) if ids.thread_id else None,
            source="middleware",
            org_id=ids.org_id,
        )


UserIdFrom = Callable[[ToolRuntime[Any, Any]], str | None]


def user_id_from_runtime(user_key: str = DEFAULT_USER_KEY) -> UserIdFrom:
    """A ``user_id_from`` by the one identity rule
    (:func:`~worker.integrations.capture.resolve_identity`) over the tool's runtime: the
    authenticated identity on an authenticating server, else ``user_key`` from the run's
    context, ``configurable`` or metadata. Raises :class:`~worker.errors.IdentityMismatch`
    when the run names another user than the authenticated one."""

    def read(runtime: ToolRuntime[Any, Any]) -> str | None:
        return resolve_identity(runtime, runtime.config, user_key=user_key).user_id

    return read


def tool_user(runtime: ToolRuntime[Any, Any], user_id_from: UserIdFrom | None) -> str | None:
    """The user a memory tool acts for (:func:`tool_identity`'s user)."""
    return tool_identity(runtime, user_id_from).user_id


def tool_identity(runtime: ToolRuntime[Any, Any], user_id_from: UserIdFrom | None) -> Identity:
    """The user (and org) a memory tool acts for. An application's ``user_id_from`` decides
    the user on a server that does not authenticate; on one that does, its answer must be the
    identity too (else :class:`~worker.errors.IdentityMismatch`), so no resolver can switch
    users. The org is the identity's org claim (or, unauthenticated, the run's ``org_id``)."""
    claim = ("user_id_from", user_id_from(runtime)) if user_id_from is not None else None
    return resolve_identity(runtime, runtime.config, user_claim=claim)


#: What the model is told about the memory tools.
REMEMBER_DESCRIPTION = (
    "Save something the user wants remembered across conversations (a fact about them, a "
    "preference). `text`: the statement; `topic`: optional file such as 'preferences'; `key`: "
    "optional slot such as 'preference.language' so a newer value replaces the older one."
)
FORGET_DESCRIPTION = "Forget something previously remembered. `text`: what to forget."
#: What the tools answer the model.
REMEMBERED_REPLY = "Noted; it will be remembered."
FORGOTTEN_REPLY = "Noted; it will be forgotten."
REFUSED_REPLY = (
    "Refused: this conversation names another user than the signed-in one; nothing was changed."
)


def _tool_args(
    runtime: ToolRuntime[Any, Any],
    identity: Identity,
    assistant_id: str | None,
    text: str,
    kind: str,
    **extra: str | None,
) -> EnqueueFields:
    """A tool call's candidate: ids from the run, never from the model's arguments."""
    thread_id, trace_id = read_trace_ids(runtime, runtime.config)
    return EnqueueFields(
        user_id=identity.user_id,
        org_id=identity.org_id,
        trace_id=trace_id,
        text=text,
        kind=kind,
        topic=extra.get("topic"),
        key=extra.get("key"),
        assistant_id=assistant_id,
        thread_id=thread_id,
        idempotency_key=f"tool:{runtime.tool_call_id}" if runtime.tool_call_id else None,
        source="tool",
    )


def make_memory_tools(
    enqueuer: Enqueuer | AsyncEnqueuer,
    *,
    user_id_from: UserIdFrom | None = None,
    assistant_id: str | None = None,
) -> list[BaseTool]:
    """``remember`` and ``forget`` tools that enqueue ``fact`` / ``forget`` candidates.

    The user id comes from :func:`tool_user` (the authenticated identity on a server that
    authenticates, which ``user_id_from`` must agree with; otherwise ``user_id_from(runtime)``,
    by default ``user_id`` in the run's context, ``configurable`` or metadata) — never from the
    model's arguments, so neither a prompt nor a run's context can write into someone else's
    memory (a mismatch is refused, counted, and told to the model). The idempotency key is
    the tool call id, so a retried call dedupes. A queue failure becomes a short tool result
    the model can relay; it never raises.

    >>> [t.name for t in make_memory_tools(object())]  # type: ignore[arg-type]
    ['remember', 'forget']
    """

    def args_for(
        runtime: ToolRuntime[Any, Any], text: str, kind: str, **extra: str | None
    ) -> EnqueueFields | None:
        try:
            identity = tool_identity(runtime, user_id_from)
        except IdentityMismatch as exc:  # another user's memory: refused and counted
            report_refused(TOOLS_INTEGRATION, exc)
            return None
        return _tool_args(runtime, identity, assistant_id, text, kind, **extra)

    def save(args: EnqueueFields | None, ok: str) -> str:
        if args is None:
            return REFUSED_REPLY
        return _reply(submit(enqueuer, TOOLS_INTEGRATION, **args), ok)

    async def asave(args: EnqueueFields | None, ok: str) -> str:
        if args is None:
            return REFUSED_REPLY
        return _reply(await asubmit(enqueuer, TOOLS_INTEGRATION, **args), ok)

    def remember(
        text: str, runtime: ToolRuntime[Any, Any], topic: str | None = None, key: str | None = None
    ) -> str:
        return save(args_for(runtime, text, "fact", topic=topic, key=key), REMEMBERED_REPLY)

    async def aremember(
        text: str, runtime: ToolRuntime[Any, Any], topic: str | None = None, key: str | None = None
    ) -> str:
        return await asave(args_for(runtime, text, "fact", topic=topic, key=key), REMEMBERED_REPLY)

    def forget(text: str, runtime: ToolRuntime[Any, Any]) -> str:
        return save(args_for(runtime, text, "forget"), FORGOTTEN_REPLY)

    async def aforget(text: str, runtime: ToolRuntime[Any, Any]) -> str:
        return await asave(args_for(runtime, text, "forget"), FORGOTTEN_REPLY)

    return [
        StructuredTool.from_function(
            func=remember,
            coroutine=aremember,
            name="remember",
            description=REMEMBER_DESCRIPTION,
        ),
        StructuredTool.from_function(
            func=forget,
            coroutine=aforget,
            name="forget",
            description=FORGET_DESCRIPTION,
        ),
    ]


def _reply(candidate_id: str | None, ok: str) -> str:
    if candidate_id is None:
        return "Could not save this to memory right now; nothing was changed."
    return ok
