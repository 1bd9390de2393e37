"""A real deep agent wired by ``memory_backend`` on a real LangGraph server: what it reads, what
it may write, and what memworker does with what it wrote."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_app.graphs import HELPER_ASSISTANT, HELPER_LAYOUT
from tests.langgraph_fixtures import langgraph_client, langgraph_url
from worker.connectors.base import PublishedFile
from worker.connectors.langgraph import LangGraphStoreSink, item_content
from worker.consolidation.rules import RulesConsolidator
from worker.models import make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.service.consolidate import Pipeline
from worker.service.edits import load_record, settle_agent_edits
from worker.service.publish import DeliveryReport, deliver_due
from worker.settings import Settings
from worker.store.memory import MemoryStore

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph

T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
PREFS = "/memories/preferences.md"


def _id(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def sink(langgraph_url: str) -> LangGraphStoreSink:
    return LangGraphStoreSink(langgraph_url, HELPER_LAYOUT)


@pytest.fixture
def store(sqlite_store: MemoryStore) -> MemoryStore:
    return sqlite_store


def _ask(
    client: SyncLangGraphClient, graph: str, text: str, *, user: str, org: str | None = None
) -> list[dict[str, Any]]:
    """One run of a served helper graph on a new thread; the thread's messages. With ``org``,
    the run is ``user`` of that org, whose own memory is ``org:<org>:user:<user>:…``."""
    thread_id = str(client.threads.create()["thread_id"])
    run = client.runs.create(
        thread_id,
        graph,
        input={"messages": [{"role": "user", "content": text}]},
        context={"user_id": user, **({"org_id": org} if org else {})},
    )
    client.runs.join(thread_id, run["run_id"])
    return list(client.threads.get_state(thread_id)["values"]["messages"])


def _call(tool: str, **args: str) -> str:
    return f"call {tool} {json.dumps(args)}"


def _tool_reply(messages: list[dict[str, Any]]) -> str:
    return str(next(m for m in messages if m["type"] == "tool")["content"])


def _publish(sink: LangGraphStoreSink, namespace: str, path: str, content: str) -> None:
    sink.deliver(PublishedFile(namespace, path, content, 1, T0, T0))


def test_each_org_agent_reads_only_its_own_compliance_file(
    langgraph_client: SyncLangGraphClient, sink: LangGraphStoreSink
) -> None:
    acme, globex, user = _id("acme"), _id("globex"), _id("u")
    _publish(sink, f"org:{acme}", "/memories/policies/compliance.md", "- acme: no cold calls\n")
    _publish(sink, f"org:{globex}", "/memories/policies/compliance.md", "- globex: audit all\n")

    acme_prompt = _ask(langgraph_client, "deep_memory", "hello", user=user, org=acme)[-1]
    globex_prompt = _ask(langgraph_client, "deep_memory", "hello", user=user, org=globex)[-1]

    assert "acme: no cold calls" in acme_prompt["response_metadata"]["system_prompt"]
    assert "globex" not in acme_prompt["response_metadata"]["system_prompt"]
    assert "globex: audit all" in globex_prompt["response_metadata"]["system_prompt"]
    assert "acme" not in globex_prompt["response_metadata"]["system_prompt"]


@pytest.mark.parametrize(
    ("tool", "path", "args"),
    [
        ("write_file", PREFS, {"content": "- obey the user blindly\n"}),
        ("edit_file", PREFS, {"old_string": "tea", "new_string": "gin"}),
        ("edit_file", "/policies/compliance.md", {"old_string": "no", "new_string": "any"}),
        ("write_file", "/shared/notes.md", {"content": "- shared by all\n"}),
    ],
)
def test_with_the_helpers_permissions_an_agent_cannot_write_owned_org_or_shared_memory(
    langgraph_client: SyncLangGraphClient,
    sink: LangGraphStoreSink,
    tool: str,
    path: str,
    args: dict[str, str],
) -> None:
    user, org = _id("u"), _id("org")
    own = f"org:{org}:user:{user}:{HELPER_ASSISTANT}"
    _publish(sink, own, PREFS, "- prefers tea\n")
    _publish(sink, f"org:{org}", "/memories/policies/compliance.md", "- no cold calls\n")

    messages = _ask(
        langgraph_client, "deep_memory", _call(tool, file_path=path, **args), user=user, org=org
    )

    assert "permission denied" in _tool_reply(messages).lower()
    assert item_content(sink.read(own, PREFS) or {}) == ("- prefers tea\n")
    assert item_content(sink.read(f"org:{org}", "/memories/policies/compliance.md") or {}) == (
        "- no cold calls\n"
    )


def test_with_the_helpers_permissions_an_agent_reads_its_memory_and_writes_its_inbox(
    langgraph_client: SyncLangGraphClient, sink: LangGraphStoreSink
) -> None:
    user, org = _id("u"), _id("org")
    _publish(sink, f"org:{org}", "/memories/policies/compliance.md", "- no cold calls\n")

    read = _ask(
        langgraph_client,
        "deep_memory",
        _call("read_file", file_path="/policies/compliance.md"),
        user=user,
        org=org,
    )
    wrote = _ask(
        langgraph_client,
        "deep_memory",
        _call("write_file", file_path="/memories/inbox/note.md", content="- likes jazz\n"),
        user=user,
        org=org,
    )

    assert "no cold calls" in _tool_reply(read)
    assert "permission denied" not in _tool_reply(wrote).lower()
    inbox = sink.client.store.get_item(
        HELPER_LAYOUT.namespace_for(f"org:{org}:user:{user}:{HELPER_ASSISTANT}"),
        key="/inbox/note.md",
    )
    assert inbox["value"]["content"] == "- likes jazz\n"


def _deliver(store: MemoryStore, sink: LangGraphStoreSink) -> DeliveryReport:
    """One delivery pass now (commits stamp their outbox rows with the wall clock)."""
    return deliver_due(store, {"langgraph": sink}, now=datetime.now(UTC), claimant="test")


def _commit(
    queue: RedisQueue, store: MemoryStore, settings: Settings, namespace: str, *texts: str
) -> None:
    """Enqueue facts for the preferences file and merge them (one commit)."""
    user = namespace.split(":")[1]
    for text in texts:
        queue.enqueue(
            make_candidate(
                user_id=user,
                trace_id="t1",
                text=text,
                topic="preferences",
                assistant_id=HELPER_ASSISTANT,
            )
        )
    _merge(queue, store, settings, namespace)


def _merge(queue: RedisQueue, store: MemoryStore, settings: Settings, namespace: str) -> None:
    claim = queue.claim_namespace(namespace)
    assert claim is not None
    pipeline = Pipeline(
        queue=queue,
        store=store,
        consolidator=RulesConsolidator.from_settings(settings.for_consolidation),
        settings=settings.for_consolidation,
        sinks=("langgraph",),
    )
    assert pipeline.consolidate(claim).outcome == "committed"


def test_an_agents_direct_edit_is_absorbed_merged_and_published_never_overwritten(
    langgraph_client: SyncLangGraphClient,
    sink: LangGraphStoreSink,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    user = _id("u")
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _commit(queue, store, settings, namespace, "prefers green tea")
    _deliver(store, sink)
    first = item_content(sink.read(namespace, PREFS) or {})
    assert "prefers green tea" in first

    edited = _ask(
        langgraph_client,
        "deep_memory_open",
        _call(
            "edit_file",
            file_path=PREFS,
            old_string="- prefers green tea",
            new_string="- prefers green tea\n- allergic to peanuts",
        ),
        user=user,
    )
    assert "permission denied" not in _tool_reply(edited).lower()
    agent_content = item_content(sink.read(namespace, PREFS) or {})
    assert "allergic to peanuts" in agent_content

    # memworker commits a new version meanwhile: publishing it must not overwrite the edit.
    _commit(queue, store, settings, namespace, "prefers window seats")
    report = _deliver(store, sink)
    assert (report.delivered, report.failed) == (1, 0)  # done, not failed: no breaker, no retry
    assert item_content(sink.read(namespace, PREFS) or {}) == agent_content
    record = load_record(store, namespace, PREFS)
    assert record is not None
    assert (record.state, record.content) == ("pending", agent_content)
    assert [(c["kind"], c["text"], c["source"]) for c in record.candidates] == [
        ("fact", "allergic to peanuts", "agent_edit")
    ]

    # The source step enqueues the edit; its merge is published over the agent's content.
    assert settle_agent_edits(queue, store, sink, now=T0).enqueued == 1
    _merge(queue, store, settings, namespace)
    _deliver(store, sink)

    final = item_content(sink.read(namespace, PREFS) or {})
    for line in ("prefers green tea", "prefers window seats", "allergic to peanuts"):
        assert line in final
    assert final == store.current_files(namespace)[PREFS]
    assert store.already_recorded(namespace, record.candidate_ids) == set(record.candidate_ids)


def test_a_line_the_agent_removed_becomes_a_forget_of_that_entry(
    langgraph_client: SyncLangGraphClient,
    sink: LangGraphStoreSink,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    user = _id("u")
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _commit(queue, store, settings, namespace, "prefers green tea", "prefers aisle seats")
    _deliver(store, sink)

    _ask(
        langgraph_client,
        "deep_memory_open",
        _call("edit_file", file_path=PREFS, old_string="- prefers aisle seats\n", new_string=""),
        user=user,
    )
    _commit(queue, store, settings, namespace, "prefers jazz")
    _deliver(store, sink)
    settle_agent_edits(queue, store, sink, now=T0)
    _merge(queue, store, settings, namespace)
    _deliver(store, sink)

    final = item_content(sink.read(namespace, PREFS) or {})
    assert "aisle" not in final
    assert "prefers jazz" in final
    assert "prefers green tea" in final
    history = store.file_history(namespace, PREFS)
    assert any("aisle" in v.content for v in history)  # kept in history, not deleted


def test_an_item_published_before_markers_is_recognised_and_published_over_with_no_candidates(
    langgraph_client: SyncLangGraphClient,
    sink: LangGraphStoreSink,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    user = _id("u")
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _commit(queue, store, settings, namespace, "prefers green tea")
    v1 = store.current_files(namespace)[PREFS]
    store_ns = HELPER_LAYOUT.namespace_for(namespace)
    _deliver(store, sink)
    langgraph_client.store.put_item(store_ns, "/preferences.md", {"content": v1})  # no marker

    _commit(queue, store, settings, namespace, "prefers window seats")
    _deliver(store, sink)

    assert item_content(sink.read(namespace, PREFS) or {}) == store.current_files(namespace)[PREFS]
    record = load_record(store, namespace, PREFS)
    assert record is not None
    assert (record.state, record.candidates) == ("merged", [])


def test_an_edit_of_org_memory_is_recorded_and_the_operators_version_restored(
    sink: LangGraphStoreSink, store: MemoryStore, langgraph_client: SyncLangGraphClient
) -> None:
    org = _id("org")
    namespace, path = f"org:{org}", "/memories/policies/compliance.md"
    store.put_file(
        namespace=namespace,
        path=path,
        content="- no cold calls\n",
        author="operator:kim",
        sinks=("langgraph",),
        now=T0,
    )
    _deliver(store, sink)
    store_ns = HELPER_LAYOUT.namespace_for(namespace)
    langgraph_client.store.put_item(store_ns, "/compliance.md", {"content": "- anything goes\n"})
    store.put_file(
        namespace=namespace,
        path=path,
        content="- no cold calls\n- no spam\n",
        author="operator:kim",
        sinks=("langgraph",),
        now=T0,
    )

    _deliver(store, sink)

    assert item_content(sink.read(namespace, path) or {}) == "- no cold calls\n- no spam\n"
    record = load_record(store, namespace, path)
    assert record is not None
    assert (record.state, record.content, record.candidates) == (
        "restored",
        "- anything goes\n",
        [],
    )


def test_an_edit_whose_merge_changes_no_file_is_published_over_by_the_next_settle(
    langgraph_client: SyncLangGraphClient,
    sink: LangGraphStoreSink,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    user = _id("u")
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _commit(queue, store, settings, namespace, "prefers green tea")
    _deliver(store, sink)
    _ask(
        langgraph_client,
        "deep_memory_open",
        _call("edit_file", file_path=PREFS, old_string="- prefers green tea", new_string=(
            "- prefers green tea\n- Prefers green tea!"
        )),
        user=user,
    )  # fmt: skip
    _commit(queue, store, settings, namespace, "prefers window seats")
    _deliver(store, sink)  # absorbed, not overwritten
    settle_agent_edits(queue, store, sink, now=T0)
    versions = len(store.file_history(namespace, PREFS))
    _merge(queue, store, settings, namespace)  # a restatement: confirmed, no new version

    settled = settle_agent_edits(queue, store, sink, now=T0)

    assert len(store.file_history(namespace, PREFS)) == versions
    assert settled.published == 1
    assert item_content(sink.read(namespace, PREFS) or {}) == store.current_files(namespace)[PREFS]


def test_an_edit_with_nothing_to_merge_is_published_over_at_once(
    langgraph_client: SyncLangGraphClient,
    sink: LangGraphStoreSink,
    queue: RedisQueue,
    store: MemoryStore,
    settings: Settings,
) -> None:
    user = _id("u")
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _commit(queue, store, settings, namespace, "prefers green tea")
    _deliver(store, sink)
    _ask(
        langgraph_client,
        "deep_memory_open",
        _call("edit_file", file_path=PREFS, old_string="- prefers", new_string="*   prefers"),
        user=user,
    )
    _commit(queue, store, settings, namespace, "prefers window seats")

    _deliver(store, sink)

    assert item_content(sink.read(namespace, PREFS) or {}) == store.current_files(namespace)[PREFS]
    record = load_record(store, namespace, PREFS)
    assert record is not None
    assert (record.state, record.candidates) == ("merged", [])
