"""One bad item never blocks anyone else's scan: each namespace and inbox item is its own
bulkhead, and the scan names what it set aside.

Against a real ``langgraph dev`` store: a user whose inbox holds one file of 10,001 lines,
beside other users with ordinary inbox items; and a user whose queue backlog is full.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.langgraph_fixtures import langgraph_client, langgraph_url
from worker.connectors import inbox as inbox_source
from worker.connectors.inbox import CURSOR_SOURCE
from worker.connectors.layout import StoreLayout
from worker.models import Namespace, make_candidate
from worker.queue.redis_queue import RedisQueue
from worker.runtime.container import scan_parts
from worker.service.scan import SourceScan, scan_sources
from worker.settings import Settings
from worker.store.memory import MemoryStore
from worker.types import MAX_INBOX_ITEM_BYTES, MAX_INBOX_ITEM_LINES

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph

HUGE: Final = 10_001
#: Lines of the slow-poison dump: quadratic line deduplication made a scan of 80,000 such lines
#: take 27-35 s, every scan; a quarter of that shows the same per-line work in seconds.
DUMP_LINES: Final = 20_000


@pytest.fixture
def cfg(settings: Settings, langgraph_url: str) -> Settings:
    return settings.model_copy(update={"langgraph_url": langgraph_url, "sinks": ["langgraph"]})


def _inbox_item(client: SyncLangGraphClient, cfg: Settings, user: str, name: str, text: str) -> str:
    layout = StoreLayout.from_settings(cfg.for_sinks)
    key = f"{layout.inbox_prefix}t-1/{name}"
    now = datetime.now(UTC).isoformat()
    value = {"content": text, "encoding": "utf-8", "created_at": now, "modified_at": now}
    client.store.put_item(layout.namespace_for(Namespace.for_user(user).key), key, value)
    return key


def _scan(queue: RedisQueue, store: MemoryStore, cfg: Settings) -> SourceScan:
    now = datetime.now(UTC)
    with scan_parts(cfg) as parts:
        return scan_sources(
            queue, store, parts, start=now - timedelta(hours=1), end=now + timedelta(minutes=1),
            trace_id="scan", now=now,
        )  # fmt: skip


def _of(scan: SourceScan, users: list[str]) -> list[tuple[str, str | None]]:
    """What the scan set aside of ``users`` (the server's store is shared by the session)."""
    mine = {f"user:{u}" for u in users}
    return [(a.namespace, a.item) for a in scan.set_aside if a.namespace in mine]


def _users(n: int) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [f"u{tag}{i}" for i in range(n)]


def test_a_10001_line_inbox_file_is_set_aside_and_every_other_users_items_are_enqueued(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, sqlite_store: MemoryStore,
    cfg: Settings,
) -> None:  # fmt: skip
    users = _users(3)
    big, *others = users
    lines = "".join(f"- fact number {i}\n" for i in range(HUGE))
    huge_key = _inbox_item(langgraph_client, cfg, big, "dump.md", lines)
    _inbox_item(langgraph_client, cfg, big, "small.md", "- likes jazz\n")
    for user in others:
        _inbox_item(langgraph_client, cfg, user, "a.md", "- prefers tea\n- lives in Oslo\n")

    scan = _scan(queue, sqlite_store, cfg)

    assert _of(scan, users) == [(f"user:{big}", huge_key)]
    (reason,) = [a.reason for a in scan.set_aside if a.item == huge_key]
    assert f"{HUGE} lines, more than {MAX_INBOX_ITEM_LINES}" in reason
    assert [len(queue.admin.pending(f"user:{u}")) for u in others] == [2, 2]
    assert len(queue.admin.pending(f"user:{big}")) == 1  # the small item of the same user went in
    assert sqlite_store.get_cursor(CURSOR_SOURCE, f"user:{others[0]}") is not None
    again = _scan(queue, sqlite_store, cfg)  # the dump is still reported, nothing re-enqueued
    assert _of(again, users) == [(f"user:{big}", huge_key)]
    assert [len(queue.admin.pending(f"user:{u}")) for u in users] == [1, 2, 2]


def test_a_user_whose_backlog_is_full_is_set_aside_saying_how_many_went_in(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, sqlite_store: MemoryStore,
    cfg: Settings,
) -> None:  # fmt: skip
    users = _users(2)
    full, other = users
    limited = queue.__class__(
        queue.redis, cfg.model_copy(update={"max_pending_per_namespace": 3}).for_queue
    )
    limited.admin.publish_policy()
    for i in range(2):
        limited.enqueue(make_candidate(user_id=full, trace_id="t", text=f"Remember {i} holds"))
    _inbox_item(langgraph_client, cfg, full, "a.md", "- one\n- two\n- three\n")
    _inbox_item(langgraph_client, cfg, other, "a.md", "- prefers tea\n")

    scan = _scan(limited, sqlite_store, cfg)

    assert _of(scan, users) == [(f"user:{full}", None)]
    (aside,) = [a for a in scan.set_aside if a.namespace == f"user:{full}"]
    assert "1 of 3 candidates were enqueued, the rest refused" in aside.reason
    assert "nothing was enqueued" not in aside.reason
    assert len(limited.admin.pending(f"user:{other}")) == 1
    assert sqlite_store.get_cursor(CURSOR_SOURCE, f"user:{other}") is not None
    assert sqlite_store.get_cursor(CURSOR_SOURCE, f"user:{full}") is None  # read again later


class _Spy:
    """Wraps a function of the inbox source and keeps what each call was given (the real
    function still runs): how much per-item and per-line work a scan did. The server's store
    is shared by the session, so a test looks only for its own item's traces."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.given: list[str] = []
        real: Callable[..., Any] = getattr(inbox_source, name)

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.given.append(str(kwargs["text"] if "text" in kwargs else args[0]))
            return real(*args, **kwargs)

        monkeypatch.setattr(inbox_source, name, spy)

    def take(self) -> list[str]:
        given, self.given = self.given, []
        return given


def test_an_inbox_dump_is_set_aside_before_any_line_is_read_and_later_scans_do_not_read_it(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, sqlite_store: MemoryStore,
    cfg: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    users = _users(2)
    big, other = users
    dump = "".join(f"- note {i}\n" for i in range(DUMP_LINES))
    dump_key = _inbox_item(langgraph_client, cfg, big, "dump.md", dump)
    _inbox_item(langgraph_client, cfg, big, "small.md", "- likes jazz\n")
    _inbox_item(langgraph_client, cfg, other, "a.md", "- prefers tea\n")
    lines = _Spy(monkeypatch, "make_candidate")  # one call per line turned into a candidate
    hashed = _Spy(monkeypatch, "content_sha256")  # one call per item read

    first = _scan(queue, sqlite_store, cfg)
    lines_first, hashed_first = lines.take(), hashed.take()
    second = _scan(queue, sqlite_store, cfg)

    assert _of(first, users) == _of(second, users) == [(f"user:{big}", dump_key)]
    assert [t for t in lines_first if t.startswith("note ")] == []  # not one line of the dump
    assert hashed_first.count(dump) == 1
    assert [t for t in lines.take() if t.startswith("note ")] == []
    assert dump not in hashed.take()  # the second scan does not read the dump again
    assert [len(queue.admin.pending(f"user:{u}")) for u in users] == [1, 1]


def test_an_inbox_item_over_the_byte_bound_is_set_aside_and_kept_in_the_inbox(
    langgraph_client: SyncLangGraphClient, queue: RedisQueue, sqlite_store: MemoryStore,
    cfg: Settings,
) -> None:  # fmt: skip
    (user,) = _users(1)
    blob = "- " + "x" * MAX_INBOX_ITEM_BYTES + "\n"  # one line, over the bound
    key = _inbox_item(langgraph_client, cfg, user, "blob.md", blob)
    store_ns = StoreLayout.from_settings(cfg.for_sinks).namespace_for(f"user:{user}")

    scans = [_scan(queue, sqlite_store, cfg) for _ in range(2)]

    assert [_of(scan, [user]) for scan in scans] == [[(f"user:{user}", key)]] * 2
    (reason,) = {a.reason for scan in scans for a in scan.set_aside if a.item == key}
    assert f"more than {MAX_INBOX_ITEM_BYTES} bytes" in reason
    assert langgraph_client.store.get_item(store_ns, key=key)["value"]["content"] == blob
    assert queue.admin.pending(f"user:{user}") == []
