"""Capture conversations for memory from inside a LangChain agent.

:class:`MemoryCaptureMiddleware` goes into ``create_agent(middleware=[...])`` (or a deep
agent's ``middleware``). After each agent run it enqueues ONE ``turn`` candidate: the run's
last user input and its final assistant reply, never tool calls or tool results. The
consolidation worker later decides what, if anything, is worth remembering.

:func:`make_memory_tools` gives the model ``remember`` and ``forget`` tools that enqueue
``fact`` / ``forget`` candidates; consolidation still decides what is stored.

Neither ever raises into the agent: queue trouble is logged and counted (see
:mod:`worker.integrations.enqueuer`) and the reply goes on.

>>> from langchain.agents import create_agent                       # doctest: +SKIP
>>> from worker.hotpath.client import MemoryClient                  # doctest: +SKIP
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

from collections.abc import Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.runtime import Runtime

from worker.constants import MAX_TEXT_BYTES
from worker.errors import IdentityMismatch
from worker.exchanges import split_exchanges
from worker.identity import Identity
from worker.integrations.enqueuer import (
    AsyncEnqueuer,
    Enqueuer,
    asubmit,
    report_refused,
    submit,
)
from worker.integrations.run_context import (
    USER_KEY,
    current_config,
    read_run_ids,
    read_trace_ids,
    resolve_identity,
)
from worker.models import EnqueueFields

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
    (:func:`~worker.integrations.run_context.resolve_identity`) over the tool's runtime: the
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
