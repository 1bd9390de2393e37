"""Reserved paths: nothing memworker writes may land under the inbox route.

Agents write the inbox freely and the inbox scan removes each item once merged, so a memory
file memworker wrote there would be deleted from the store by the next scan. The one rule
(:func:`worker.types.reserved_prefix`) is attacked at every entry: an enqueue topic (the
hot-path client, the agent's own ``remember`` tool), a plan's path, ``put`` and import, with
the default inbox and a deployment's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.integration.test_cli_support import Ops, ops
from tests.langgraph_app.scripted import QueuedChatModel
from tests.support.consolidation_factories import at, cand, state
from tests.support.memory_queue import make_enqueuer, queued
from worker.consolidation.plan import Add, Plan, consolidate_batch, validate_plan
from worker.consolidation.rules import RulesConsolidator
from worker.errors import InvalidCandidate
from worker.integrations.capture import make_memory_tools
from worker.models import make_candidate
from worker.settings import Settings
from worker.types import reserved_prefix

__all__ = ["ops"]

POLICY = "# Notes\n\n- Be brief.\n"


@pytest.mark.parametrize(
    "topic",
    ["inbox/t1/notes", "/memories/inbox/t1/notes.md", " inbox/x ", "inbox/deep/er/still.md"],
)
def test_an_enqueue_topic_under_the_inbox_is_refused_naming_the_prefix(topic: str) -> None:
    with pytest.raises(InvalidCandidate, match="reserved prefix /memories/inbox/") as err:
        make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", topic=topic)
    assert "choose another topic" in str(err.value)


@pytest.mark.parametrize("topic", ["inbox", "inboxes/work", "mail/inbox", "Inbox-notes"])
def test_a_topic_merely_named_like_the_inbox_is_accepted(topic: str) -> None:
    made = make_candidate(user_id="u1", trace_id="t1", text="I prefer tea", topic=topic)
    assert made.path is not None
    assert reserved_prefix(made.path) is None


def test_the_hot_path_client_refuses_an_inbox_topic(redis_url: str, key_prefix: str) -> None:
    client = make_enqueuer(redis_url, key_prefix)
    with pytest.raises(InvalidCandidate, match="reserved prefix"):
        client.enqueue(user_id="u-res", trace_id="t1", text="I prefer tea", topic="inbox/a")
    assert queued(redis_url, key_prefix, "user:u-res") == []


def test_the_agents_remember_tool_cannot_write_into_the_inbox(
    redis_url: str, key_prefix: str
) -> None:
    call = {"name": "remember", "args": {"text": "I prefer tea", "topic": "inbox/t1/x"},
            "id": "call-inbox"}  # fmt: skip
    agent = create_agent(
        QueuedChatModel(responses=[AIMessage("", tool_calls=[call]), AIMessage("Saved.")]),
        tools=make_memory_tools(make_enqueuer(redis_url, key_prefix)),
        checkpointer=InMemorySaver(),
    )

    agent.invoke(
        {"messages": [("user", "remember I prefer tea")]},
        {"configurable": {"thread_id": "t-res", "user_id": "u-tool-res"}},
    )

    assert queued(redis_url, key_prefix, "user:u-tool-res") == []


def test_a_plan_writing_into_the_inbox_is_a_problem() -> None:
    c = cand("I prefer tea")
    plan = Plan(ops=[Add(candidate_ids=[c.id], path="/memories/inbox/t1/x.md", text="Tea")])
    found = validate_plan(state(), [c], plan, max_removals=5, max_text_bytes=100)
    assert any("reserved prefix /memories/inbox/" in p for p in found)


def test_a_plan_writing_into_the_deployments_own_inbox_is_a_problem() -> None:
    c = cand("I prefer tea")
    plan = Plan(ops=[Add(candidate_ids=[c.id], path="/memories/drop/x.md", text="Tea")])
    found = validate_plan(
        state(), [c], plan, max_removals=5, max_text_bytes=100, reserved=("/memories/drop/",)
    )
    assert any("reserved prefix /memories/drop/" in p for p in found)


def test_put_into_the_inbox_exits_2_and_writes_nothing(ops: Ops, tmp_path: Path) -> None:
    source = tmp_path / "notes.md"
    source.write_text(POLICY)
    bot = "bot-" + ops.user

    ran = ops("put", "--assistant", bot, "--path", "inbox/t1/notes.md", str(source))

    assert ran.code == 2
    assert "reserved prefix /memories/inbox/" in " ".join(ran.err.split())
    assert ops.store.list_files(f"agent:{bot}") == []


def test_put_into_a_configured_inbox_route_exits_2(ops: Ops, tmp_path: Path) -> None:
    source = tmp_path / "notes.md"
    source.write_text(POLICY)

    ran = ops(
        "put", "--org", "acme-" + ops.user, "--path", "drop/notes.md", str(source),
        MEMWORKER_INBOX_ROUTE="/memories/drop/",
    )  # fmt: skip

    assert ran.code == 2
    assert "reserved prefix /memories/drop/" in " ".join(ran.err.split())


def _export(ops: Ops) -> dict:  # type: ignore[type-arg]
    ops.enqueue("I have a dog named Rex", topic="pets")
    ops("reconcile", "--user", ops.user)
    return dict(json.loads(ops("export", "--user", ops.user).out))


def _move(doc: dict, to: str) -> None:  # type: ignore[type-arg]
    for f in doc["files"]:
        f["path"] = to
    for e in doc["entries"]:
        e["path"] = to


def test_an_import_placing_a_file_in_the_inbox_is_refused(ops: Ops, tmp_path: Path) -> None:
    doc = _export(ops)
    _move(doc, "/memories/inbox/t1/pets.md")
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(doc))

    ran = ops("import", str(crafted), "--namespace", f"user:{ops.user}-copy")

    assert ran.code == 2
    assert "reserved prefix /memories/inbox/" in " ".join(ran.err.split())
    assert ops.store.namespaces(user_id=f"{ops.user}-copy") == []


def test_an_import_into_a_configured_inbox_route_is_refused(ops: Ops, tmp_path: Path) -> None:
    doc = _export(ops)
    _move(doc, "/memories/drop/pets.md")
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(doc))

    ran = ops(
        "import", str(crafted), "--namespace", f"user:{ops.user}-copy",
        MEMWORKER_INBOX_ROUTE="/memories/drop/",
    )  # fmt: skip

    assert ran.code == 2
    assert "reserved prefix /memories/drop/" in " ".join(ran.err.split())


def test_a_candidate_under_the_deployments_own_inbox_is_rejected_alone() -> None:
    settings = Settings(inbox_route="/memories/drop/")
    stray, fine = cand("I prefer tea", topic="drop/t1", minute=1), cand("I have a dog", minute=2)

    _, applied = consolidate_batch(RulesConsolidator(), state(), [stray, fine], now=at(3),
                                   settings=settings, current_files={})  # fmt: skip

    outcomes = {row.candidate_id: (row.outcome, row.reason) for row in applied.ledger}
    assert outcomes[stray.id][0] == "rejected"
    assert "reserved prefix /memories/drop/" in str(outcomes[stray.id][1])
    assert outcomes[fine.id][0] == "merged"
    assert all(not f.path.startswith("/memories/drop/") for f in applied.files)
