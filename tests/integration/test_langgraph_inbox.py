"""What agents write to their inbox is merged, deduplicated, then removed; and a scanned thread
carries its assistant, so a scanned and a captured exchange are one candidate."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_app.graphs import HELPER_ASSISTANT
from tests.langgraph_fixtures import langgraph_client, langgraph_url, owned_by
from tests.support.memory_queue import queue_settings
from worker.connectors.layout import StoreLayout
from worker.consolidation.rules import RulesConsolidator
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import scan_parts
from worker.service.consolidate import Pipeline
from worker.service.scan import SourceScan, scan_sources
from worker.settings import Settings
from worker.store.memory import MemoryStore

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph


@pytest.fixture
def store(sqlite_store: MemoryStore) -> MemoryStore:
    return sqlite_store


@pytest.fixture
def cfg(settings: Settings, langgraph_url: str) -> Settings:
    return settings.model_copy(update={"langgraph_url": langgraph_url, "sinks": ["langgraph"]})


def _agent_writes(
    client: SyncLangGraphClient, user: str, path: str, content: str, org: str | None = None
) -> None:
    thread_id = str(client.threads.create()["thread_id"])
    call = json.dumps({"file_path": path, "content": content})
    run = client.runs.create(
        thread_id,
        "deep_memory",
        input={"messages": [{"role": "user", "content": f"call write_file {call}"}]},
        context={"user_id": user, **({"org_id": org} if org else {})},
    )
    client.runs.join(thread_id, run["run_id"])


def _scan(queue: RedisQueue, store: MemoryStore, cfg: Settings, trace: str) -> SourceScan:
    now = datetime.now(UTC)
    with scan_parts(cfg) as parts:
        return scan_sources(
            queue, store, parts, start=now - timedelta(hours=1), end=now + timedelta(minutes=1),
            trace_id=trace, now=now,
        )  # fmt: skip


def _merge(queue: RedisQueue, store: MemoryStore, cfg: Settings, namespace: str) -> None:
    claim = queue.claim_namespace(namespace)
    assert claim is not None
    pipeline = Pipeline(
        queue=queue,
        store=store,
        consolidator=RulesConsolidator.from_settings(cfg.for_consolidation),
        settings=cfg.for_consolidation,
        sinks=(),
    )
    assert pipeline.consolidate(claim).outcome == "committed"


def test_inbox_items_are_merged_once_deduplicated_and_removed_after_the_merge(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, store: MemoryStore, cfg: Settings
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    store_ns = StoreLayout().namespace_for(namespace)
    _agent_writes(
        langgraph_client, user, "/memories/inbox/t-1/a.md", "- likes jazz\n- prefers tea\n"
    )
    _agent_writes(langgraph_client, user, "/memories/inbox/2026-02-01-t-2.md", "- likes jazz\n")

    first = _scan(queue, store, cfg, "scan-1")
    queued = [c for _, c in queue.admin.pending(namespace)]
    again = _scan(queue, store, cfg, "scan-2")  # before the merge: nothing new, nothing removed
    _merge(queue, store, cfg, namespace)
    after = _scan(queue, store, cfg, "scan-3")

    assert first.inbox == 3
    assert sorted((c.text, c.thread_id, c.source) for c in queued) == [
        ("likes jazz", "t-1", "inbox"),
        ("likes jazz", "t-2", "inbox"),
        ("prefers tea", "t-1", "inbox"),
    ]
    assert (again.inbox, again.inbox_removed) == (0, 0)
    content = "\n".join(store.current_files(namespace).values())
    assert content.count("likes jazz") == 1
    assert content.count("prefers tea") == 1
    assert after.inbox_removed == 2
    left = langgraph_client.store.search_items(list(store_ns))["items"]
    assert [i["key"] for i in left if i["key"].startswith("/inbox/")] == []


def test_an_inbox_item_the_agent_rewrote_before_removal_is_read_again_not_removed(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, store: MemoryStore, cfg: Settings
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _agent_writes(langgraph_client, user, "/memories/inbox/t-1/a.md", "- likes jazz\n")
    _scan(queue, store, cfg, "scan-1")
    _merge(queue, store, cfg, namespace)
    _agent_writes(langgraph_client, user, "/memories/inbox/t-1/a.md", "- likes opera\n")

    rescan = _scan(queue, store, cfg, "scan-2")

    assert (rescan.inbox, rescan.inbox_removed) == (1, 0)
    assert [c.text for _, c in queue.admin.pending(namespace)] == ["likes opera"]


def test_an_inbox_line_is_said_when_the_agent_last_wrote_its_item(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, store: MemoryStore, cfg: Settings
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    _agent_writes(langgraph_client, user, "/memories/inbox/t-1/a.md", "- likes jazz\n")
    item = langgraph_client.store.get_item(
        list(StoreLayout().namespace_for(namespace)), key="/inbox/t-1/a.md"
    )
    written = datetime.fromisoformat(str(item["updated_at"]))

    _scan(queue, store, cfg, "scan-1")

    ((_, candidate),) = queue.admin.pending(namespace)
    assert candidate.occurred_at == written.astimezone(UTC)


def test_a_scanned_exchange_and_its_live_capture_are_one_candidate_of_the_assistant(
    langgraph_client: SyncLangGraphClient,
    redis_client: redis.Redis,
    store: MemoryStore,
    redis_url: str,
    langgraph_url: str,
    key_prefix: str,
) -> None:
    settings = queue_settings(redis_url, key_prefix)  # the served capture's queue settings
    queue = RedisQueue(redis_client, settings.for_queue)
    user = f"u-{uuid.uuid4().hex[:8]}"
    thread = langgraph_client.threads.create(metadata=owned_by(user))
    run = langgraph_client.runs.create(
        thread["thread_id"],
        "capture_bot",
        input={"messages": [{"role": "user", "content": "I prefer green tea"}]},
        config={"configurable": {"user_id": user, "mw_key_prefix": key_prefix}},
    )
    langgraph_client.runs.join(thread["thread_id"], run["run_id"])
    cfg = settings.model_copy(
        update={"langgraph_url": langgraph_url, "thread_assistant_key": "graph_id"}
    )
    namespace = f"user:{user}:capture_bot"

    scan = _scan(queue, store, cfg, "scan-1")
    pending = [c for _, c in queue.admin.pending(namespace)]
    _merge(queue, store, cfg, namespace)

    assert list(scan.by_namespace) == [namespace]
    assert len(pending) == 2  # the live capture and the scan ...
    assert len({c.id for c in pending}) == 1  # ... are one candidate
    assert {c.source for c in pending} == {"middleware", "thread_scan"}
    content = "\n".join(store.current_files(namespace).values())
    assert content.lower().count("green tea") == 1


def test_forget_removes_what_the_agents_wrote_to_the_users_inbox(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, store: MemoryStore, cfg: Settings
) -> None:
    from worker.connectors.langgraph import LangGraphStoreSink
    from worker.service.transfer import erase

    user = f"u-{uuid.uuid4().hex[:8]}"
    namespace = f"user:{user}:{HELPER_ASSISTANT}"
    store_ns = StoreLayout().namespace_for(namespace)
    _agent_writes(langgraph_client, user, "/memories/inbox/t-1/a.md", "- my cat is called Miso\n")
    assert langgraph_client.store.search_items(list(store_ns))["items"]  # the agent wrote it

    sinks = {"langgraph": LangGraphStoreSink.from_settings(cfg.for_sinks)}
    erase(queue.admin, store, sinks, [namespace], now=datetime.now(UTC))
    _scan(queue, store, cfg, "t-after-erase")

    assert langgraph_client.store.search_items(list(store_ns))["items"] == []
    assert queue.admin.namespace_state(namespace).pending == 0  # nothing of the user is read back


def test_an_inbox_item_of_a_user_of_an_org_is_filed_under_that_orgs_user_alone(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, store: MemoryStore, cfg: Settings
) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    _agent_writes(langgraph_client, user, "/memories/inbox/t1/n.md", "- likes jazz\n", org="acme")

    _scan(queue, store, cfg, "scan-org")

    queued = [c for _, c in queue.admin.pending(f"org:acme:user:{user}:{HELPER_ASSISTANT}")]
    assert [(c.user_id, c.text, c.source) for c in queued] == [(user, "likes jazz", "inbox")]
    assert queue.admin.pending(f"user:{user}:{HELPER_ASSISTANT}") == []
