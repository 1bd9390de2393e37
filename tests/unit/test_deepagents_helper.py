"""The deep-agent helper in process: where ids come from, and approval before a write."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from deepagents import create_deep_agent
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from tests.langgraph_app.scripted import ToolCallChatModel
from worker.errors import ConfigurationError, IdentityMismatch
from worker.integrations.deepagents import NO_ORG_NAMESPACE, memory_backend
from worker.models import Namespace, Scope


@dataclass
class _User:
    identity: str


@dataclass
class _Server:
    user: _User | None


@dataclass
class _Runtime:
    context: Any = None
    server_info: Any = None


def test_a_context_naming_another_user_than_the_authenticated_user_is_refused() -> None:
    # An authenticated run reads its own user's memory; its context may not switch users.
    memory = memory_backend(assistant_id="bot")
    runtime = _Runtime(context={"user_id": "ctx-user"}, server_info=_Server(_User("auth-user")))

    with pytest.raises(IdentityMismatch, match=r"'ctx-user'.*'auth-user'"):
        memory.memory_namespace(Scope.USER, runtime)


def test_a_context_repeating_the_authenticated_user_reads_that_users_memory() -> None:
    memory = memory_backend(assistant_id="bot")
    runtime = _Runtime(context={"user_id": "auth-user"}, server_info=_Server(_User("auth-user")))

    assert memory.memory_namespace(Scope.USER, runtime) == Namespace.for_user(
        "auth-user", assistant_id="bot"
    )


def test_without_a_context_the_authenticated_user_is_the_user() -> None:
    memory = memory_backend(assistant_id="bot")

    found = memory.memory_namespace(Scope.USER, _Runtime(server_info=_Server(_User("auth-user"))))

    assert found.user_id == "auth-user"


def test_a_run_that_names_no_user_is_refused_and_no_org_reads_nothing() -> None:
    memory = memory_backend(assistant_id="bot")

    with pytest.raises(ConfigurationError, match="names no user"):
        memory.namespace(Scope.USER)(_Runtime(context={}))
    assert memory.namespace(Scope.ORG)(_Runtime(context={"user_id": "u1"})) == NO_ORG_NAMESPACE


def test_a_write_to_an_approval_path_pauses_for_a_human_before_it_happens() -> None:
    memory = memory_backend(
        assistant_id="bot", direct_edits=True, approve=["/memories/health.md"], memory_files=[]
    )
    store = InMemoryStore()
    agent = create_deep_agent(
        model=ToolCallChatModel(),
        checkpointer=InMemorySaver(),
        store=store,
        **memory.agent_kwargs(),
    )
    call = json.dumps({"file_path": "/memories/health.md", "content": "- diabetic\n"})
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}

    result = agent.invoke(
        {"messages": [("user", f"call write_file {call}")]}, config, context={"user_id": "u1"}
    )

    assert result.get("__interrupt__")
    assert store.search(("bot", "u1", "memories")) == []
