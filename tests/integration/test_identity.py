"""One identity: on an authenticating server the identity (and its org claim) decides whose
memory a run touches; the run's context, ``configurable`` or metadata may repeat it, never
switch it; with orgs, the same user id in two orgs is two people. Attacked over fabricated
runtimes and configs (as a LangGraph server writes them), then through every integration path
in process: the deep-agent helper, the capture middleware, ``remember``/``forget`` and
``search_memory``/``read_memory``; and over scanned threads' metadata."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.langgraph_app.scripted import QueuedChatModel
from tests.support.memory_queue import make_enqueuer, queued
from worker.errors import IdentityMismatch, UnknownOwner
from worker.integrations.capture import (
    CAPTURE_ERRORS,
    MemoryCaptureMiddleware,
    RunIdentity,
    make_memory_tools,
    resolve_identity,
)
from worker.integrations.deepagents import (
    NO_ORG_NAMESPACE,
    MemoryHit,
    make_search_tools,
    memory_backend,
)
from worker.integrations.summary import flush_args
from worker.models import Namespace, Scope
from worker.types import thread_owner


class _ServerUser:
    """Shaped as the LangGraph server's user proxy: ``identity`` an attribute, the auth
    handler's other fields reachable as items."""

    def __init__(self, identity: str, **claims: str) -> None:
        self.identity = identity
        self.is_authenticated = True
        self._claims = {"identity": identity, **claims}

    def __getitem__(self, key: str) -> str:
        return self._claims[key]


@dataclass
class _Server:
    user: Any


@dataclass
class _Runtime:
    context: Any = None
    server_info: Any = None
    config: dict[str, Any] = field(default_factory=dict)


def _as(identity: str, **claims: str) -> _Server:
    return _Server(_ServerUser(identity, **claims))


def _auth_config(identity: str, **extra: Any) -> dict[str, Any]:
    """A config as the server writes it for an authenticated run (user id only)."""
    return {"configurable": {"langgraph_auth_user_id": identity, **extra}}


# --- the resolver, from each direction ------------------------------------------------------
def test_a_context_naming_another_user_than_the_identity_is_refused() -> None:
    runtime = _Runtime(context={"user_id": "bob"}, server_info=_as("alice"))

    with pytest.raises(IdentityMismatch, match=r"context names user 'bob'.*authenticated 'alice'"):
        resolve_identity(runtime, {})


def test_a_configurable_user_id_other_than_the_authenticated_id_is_refused() -> None:
    config = _auth_config("alice", user_id="bob")

    with pytest.raises(IdentityMismatch, match="configurable names user 'bob'"):
        resolve_identity(None, config)


def test_a_metadata_user_id_other_than_the_authenticated_id_is_refused() -> None:
    config = {**_auth_config("alice"), "metadata": {"user_id": "bob"}}

    with pytest.raises(IdentityMismatch, match="metadata names user 'bob'"):
        resolve_identity(None, config)


def test_metadata_never_authenticates_a_run() -> None:
    # Thread and run metadata are client-written: an auth key there is only a claim.
    config = {**_auth_config("alice"), "metadata": {"langgraph_auth_user_id": "bob"}}

    assert resolve_identity(None, config) == RunIdentity("alice", None, authenticated=True)


def test_a_context_repeating_the_identity_narrows_nothing_away() -> None:
    runtime = _Runtime(context={"user_id": "alice", "org_id": "acme"})
    config = {"configurable": {"langgraph_auth_user": _ServerUser("alice", org_id="acme")}}

    assert resolve_identity(runtime, config) == RunIdentity("alice", "acme", authenticated=True)


def test_the_org_comes_from_the_identitys_claim_not_the_context() -> None:
    runtime = _Runtime(server_info=_as("alice", org_id="acme"))

    assert resolve_identity(runtime, {}).org_id == "acme"


def test_a_context_naming_another_org_than_the_identitys_claim_is_refused() -> None:
    runtime = _Runtime(context={"org_id": "globex"}, server_info=_as("alice", org_id="acme"))

    with pytest.raises(IdentityMismatch, match="context names organisation 'globex'"):
        resolve_identity(runtime, {})


def test_an_identity_without_an_org_claim_cannot_be_given_one_by_the_context() -> None:
    runtime = _Runtime(context={"org_id": "globex"}, server_info=_as("alice"))

    with pytest.raises(IdentityMismatch, match="vouched for no organisation"):
        resolve_identity(runtime, {})


def test_a_user_restored_as_a_plain_dict_still_authenticates_with_its_claims() -> None:
    config = {"configurable": {"langgraph_auth_user": {"identity": "alice", "org_id": "acme"}}}
    runtime = _Runtime(context={"user_id": "bob"})

    assert resolve_identity(None, config).org_id == "acme"
    with pytest.raises(IdentityMismatch):
        resolve_identity(runtime, config)


def test_an_unauthenticated_user_leaves_the_runs_claims_in_charge() -> None:
    # What a server without custom auth writes: no user object, an empty identity.
    config = {"configurable": {"langgraph_auth_user": None, "langgraph_auth_user_id": ""}}
    runtime = _Runtime(context={"user_id": "bob", "org_id": "globex"})

    assert resolve_identity(runtime, config) == RunIdentity("bob", "globex", authenticated=False)


@pytest.mark.parametrize(
    ("context", "config", "user"),
    [
        ({"user_id": "ctx"}, {"configurable": {"user_id": "conf"}}, "ctx"),
        (None, {"configurable": {"user_id": "conf"}, "metadata": {"user_id": "meta"}}, "conf"),
        (None, {"metadata": {"user_id": "meta"}}, "meta"),
    ],
)
def test_without_authentication_context_then_configurable_then_metadata_decide(
    context: Any, config: dict[str, Any], user: str
) -> None:
    assert resolve_identity(_Runtime(context=context), config).user_id == user


def test_an_applications_own_resolver_cannot_switch_an_authenticated_user() -> None:
    with pytest.raises(IdentityMismatch, match="user_id_from names user 'bob'"):
        resolve_identity(None, _auth_config("alice"), user_claim=("user_id_from", "bob"))


# --- the deep-agent helper --------------------------------------------------------------------
def test_the_helper_refuses_a_context_naming_another_user_than_the_identity() -> None:
    memory = memory_backend(assistant_id="bot")
    runtime = _Runtime(context={"user_id": "bob"}, server_info=_as("alice"))

    with pytest.raises(IdentityMismatch):
        memory.namespace(Scope.USER)(runtime)


def test_the_helper_reads_the_org_of_the_identitys_claim_and_no_org_without_one() -> None:
    memory = memory_backend(assistant_id="bot")

    with_org = memory.memory_namespace(Scope.ORG, _Runtime(server_info=_as("alice", org_id="acme")))

    assert with_org == Namespace.for_org("acme")
    assert memory.namespace(Scope.ORG)(_Runtime(server_info=_as("alice"))) == NO_ORG_NAMESPACE


# --- capture, memory tools and search tools, in process ---------------------------------------
def _authenticated_run(identity: str, **context: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, context)`` of an in-process run as an authenticating server would make it."""
    thread = "t-" + uuid.uuid4().hex[:8]
    return _auth_config(identity, thread_id=thread), dict(context)


def _refusals(integration: str) -> float:
    return float(
        CAPTURE_ERRORS.labels(integration=integration, error="IdentityMismatch")._value.get()
    )


def test_the_capture_middleware_enqueues_nothing_for_another_user_than_the_identity(
    redis_url: str, key_prefix: str
) -> None:
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("noted")]),
        middleware=[MemoryCaptureMiddleware(make_enqueuer(redis_url, key_prefix))],
        checkpointer=InMemorySaver(),
    )
    config, context = _authenticated_run("alice", user_id="bob")
    before = _refusals("capture_middleware")

    state = agent.invoke({"messages": [("user", "I have diabetes")]}, config, context=context)

    assert state["messages"][-1].text == "noted"  # the reply goes on
    assert queued(redis_url, key_prefix, "user:bob") == []
    assert queued(redis_url, key_prefix, "user:alice") == []
    assert _refusals("capture_middleware") == before + 1


def test_the_capture_middleware_captures_for_the_identity_when_the_context_names_none(
    redis_url: str, key_prefix: str
) -> None:
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("noted")]),
        middleware=[MemoryCaptureMiddleware(make_enqueuer(redis_url, key_prefix))],
        checkpointer=InMemorySaver(),
    )
    config, _ = _authenticated_run("alice")

    agent.invoke({"messages": [("user", "I prefer tea")]}, config)

    assert [c.user_id for c in queued(redis_url, key_prefix, "user:alice")] == ["alice"]


@pytest.mark.parametrize("tool", ["remember", "forget"])
def test_the_memory_tools_write_nothing_for_another_user_than_the_identity(
    redis_url: str, key_prefix: str, tool: str
) -> None:
    call = {"name": tool, "args": {"text": "my address is 1 Main St"}, "id": "call-1"}
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")]),
        tools=make_memory_tools(make_enqueuer(redis_url, key_prefix)),
        checkpointer=InMemorySaver(),
    )
    config, context = _authenticated_run("alice", user_id="bob")

    state = agent.invoke({"messages": [("user", "remember it")]}, config, context=context)

    reply = next(m for m in state["messages"] if m.type == "tool").text
    assert reply.startswith("Refused")
    assert queued(redis_url, key_prefix, "user:bob") == []


def test_a_custom_user_id_from_cannot_write_for_another_user_than_the_identity(
    redis_url: str, key_prefix: str
) -> None:
    call = {"name": "remember", "args": {"text": "I prefer tea"}, "id": "call-1"}
    tools = make_memory_tools(make_enqueuer(redis_url, key_prefix), user_id_from=lambda _rt: "bob")
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")]),
        tools=tools,
        checkpointer=InMemorySaver(),
    )
    config, _ = _authenticated_run("alice")

    agent.invoke({"messages": [("user", "remember it")]}, config)

    assert queued(redis_url, key_prefix, "user:bob") == []


class _Recorded:
    """A :class:`MemorySearch` over fixed memories that records the namespaces it was asked."""

    supports_search = True

    def __init__(self) -> None:
        self.asked: list[str] = []

    def search(self, namespace: str, query: str, *, limit: int) -> list[MemoryHit]:
        self.asked.append(namespace)
        return [MemoryHit("/memories/health.md", f"memory of {namespace}")]

    def read(self, namespace: str, path: str) -> str | None:
        self.asked.append(namespace)
        return f"file of {namespace}"


@pytest.mark.parametrize(
    ("tool", "args"), [("search_memory", {"query": "health"}), ("read_memory", {"path": "health"})]
)
def test_the_search_tools_read_nothing_for_another_user_than_the_identity(
    tool: str, args: dict[str, str]
) -> None:
    search = _Recorded()
    call = {"name": tool, "args": args, "id": "call-1"}
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")]),
        tools=make_search_tools(search),
    )
    config, context = _authenticated_run("alice", user_id="bob")

    state = agent.invoke({"messages": [("user", "what do you know?")]}, config, context=context)

    reply = next(m for m in state["messages"] if m.type == "tool").text
    assert reply.startswith("Refused")
    assert "bob" not in reply
    assert search.asked == []


def test_the_search_tools_read_the_identitys_memory_when_the_context_names_none() -> None:
    search = _Recorded()
    call = {"name": "search_memory", "args": {"query": "health"}, "id": "call-1"}
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")]),
        tools=make_search_tools(search),
    )
    config, _ = _authenticated_run("alice")

    agent.invoke({"messages": [("user", "what do you know?")]}, config)

    assert search.asked == ["user:alice"]


def test_a_summary_flush_turns_nothing_into_candidates_for_another_user() -> None:
    removed = [HumanMessage("I have diabetes", id="h1"), AIMessage("noted", id="a1")]
    runtime = _Runtime(context={"user_id": "bob"}, server_info=_as("alice"))
    before = _refusals("summary_flush")

    args = flush_args(removed, runtime, user_key="user_id", assistant_id=None, max_text_bytes=999)

    assert (args, _refusals("summary_flush")) == ([], before + 1)


# --- one user id in two organisations -------------------------------------------------------
def _org_run(identity: str, org: str) -> dict[str, Any]:
    """The config of an in-process run whose server authenticated ``identity`` of ``org``."""
    user = {"identity": identity, "org_id": org}
    return {"configurable": {"langgraph_auth_user": user, "thread_id": "t-" + uuid.uuid4().hex}}


def test_the_same_user_id_in_two_orgs_resolves_to_two_namespaces() -> None:
    acme = resolve_identity(None, _org_run("alice", "acme"))
    globex = resolve_identity(None, _org_run("alice", "globex"))

    assert acme.user_namespace("bot").key == "org:acme:user:alice:bot"
    assert globex.user_namespace("bot").key == "org:globex:user:alice:bot"


def test_the_helper_gives_the_same_user_id_in_two_orgs_two_store_namespaces() -> None:
    memory = memory_backend(assistant_id="bot")

    acme = memory.namespace(Scope.USER)(_Runtime(server_info=_as("alice", org_id="acme")))
    globex = memory.namespace(Scope.USER)(_Runtime(server_info=_as("alice", org_id="globex")))

    assert acme != globex
    assert memory.layout.parse_user(acme) == Namespace.for_user(
        "alice", assistant_id="bot", org_id="acme"
    )


def test_the_capture_of_one_orgs_user_is_filed_apart_from_the_same_id_in_another_org(
    redis_url: str, key_prefix: str
) -> None:
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("noted"), AIMessage("noted")]),
        middleware=[MemoryCaptureMiddleware(make_enqueuer(redis_url, key_prefix))],
        checkpointer=InMemorySaver(),
    )

    agent.invoke({"messages": [("user", "my PIN hint is blue")]}, _org_run("alice", "acme"))
    agent.invoke({"messages": [("user", "I prefer tea")]}, _org_run("alice", "globex"))

    acme = queued(redis_url, key_prefix, "org:acme:user:alice")
    globex = queued(redis_url, key_prefix, "org:globex:user:alice")
    assert ["PIN" in c.text for c in acme] == [True]
    assert ["tea" in c.text for c in globex] == [True]
    assert queued(redis_url, key_prefix, "user:alice") == []


def test_the_search_tools_of_one_orgs_user_search_only_that_orgs_user() -> None:
    search = _Recorded()
    call = {"name": "search_memory", "args": {"query": "health"}, "id": "call-1"}
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")]),
        tools=make_search_tools(search, assistant_id="bot"),
    )

    agent.invoke({"messages": [("user", "what do you know?")]}, _org_run("alice", "globex"))

    assert search.asked == ["org:globex:user:alice:bot"]


def test_the_memory_tools_of_one_orgs_user_write_only_to_that_orgs_user(
    redis_url: str, key_prefix: str
) -> None:
    call = {"name": "remember", "args": {"text": "I prefer tea"}, "id": "call-1"}
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("ok")]),
        tools=make_memory_tools(make_enqueuer(redis_url, key_prefix)),
        checkpointer=InMemorySaver(),
    )

    agent.invoke({"messages": [("user", "remember it")]}, _org_run("alice", "globex"))

    assert [c.text for c in queued(redis_url, key_prefix, "org:globex:user:alice")] == [
        "I prefer tea"
    ]
    assert queued(redis_url, key_prefix, "org:acme:user:alice") == []


# --- a scanned thread's owner -----------------------------------------------------------------
def test_a_thread_is_filed_under_its_owner_not_the_user_id_its_metadata_claims() -> None:
    with pytest.raises(IdentityMismatch, match=r"metadata names user 'bob', but its owner is"):
        thread_owner({"owner": "alice", "user_id": "bob"})


def test_a_thread_without_an_owner_has_no_identity_whatever_its_user_id_says() -> None:
    with pytest.raises(UnknownOwner, match="has no 'owner'"):
        thread_owner({"user_id": "bob"})


def test_a_thread_whose_owner_is_no_valid_id_has_no_owner() -> None:
    with pytest.raises(UnknownOwner, match="no valid id"):
        thread_owner({"owner": "../bob"})


def test_a_threads_org_comes_from_the_owners_org_key_never_the_client_org_id() -> None:
    metadata = {"owner": "alice", "owner_org": "acme", "org_id": "globex"}

    with pytest.raises(IdentityMismatch, match="names organisation 'globex'"):
        thread_owner(metadata, org_key="owner_org")
    assert thread_owner({"owner": "alice", "owner_org": "acme"}, org_key="owner_org") == (
        RunIdentity("alice", "acme", authenticated=True)
    )
