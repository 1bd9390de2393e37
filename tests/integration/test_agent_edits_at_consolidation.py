"""An agent's direct edit of its published file is merged at the next consolidation of its
namespace (``memworker reconcile`` or a worker's batch), with no source scan, once, and a store
that does not answer never fails the batch."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from langgraph_sdk.client import SyncLangGraphClient

from tests.integration.test_cli_support import Ops, make_ops
from tests.langgraph_fixtures import langgraph_client, langgraph_url
from worker.connectors.langgraph import item_content, store_namespace
from worker.consolidation.render import is_pointer_line, pointer_line
from worker.runtime.container import build_runtime
from worker.service.edits import load_record
from worker.types import MAX_EDIT_LINES

__all__ = ["langgraph_client", "langgraph_url"]

pytestmark = pytest.mark.langgraph

PREFS = "/memories/preferences.md"
EDIT = "allergic to peanuts"
#: Lines of the slow-poison edit: 60,000 took a batch 41-51 s and committed 60,001 entries;
#: a tenth of it shows the same (every line merged) in seconds.
DUMP_LINES = 6_000


@pytest.fixture
def extra_env() -> dict[str, str]:
    return {}


@pytest.fixture
def ops(
    sqlite_url: str,
    redis_url: str,
    key_prefix: str,
    tmp_path: Path,
    redis_client: redis.Redis,
    langgraph_url: str,
    extra_env: dict[str, str],
) -> Iterator[Ops]:
    """The CLI publishing to the LangGraph store, with agents' direct edits read back (and the
    settings a test adds by parametrizing ``extra_env``)."""
    for deployment in make_ops(
        database_url=sqlite_url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        data_dir=tmp_path / "data",
        client=redis_client,
        MEMWORKER_SINKS='["langgraph"]',
        MEMWORKER_DIRECT_EDITS="true",
        MEMWORKER_SINK_TIMEOUT_SECONDS="1",
        **extra_env,
    ):
        deployment.env["MEMWORKER_LANGGRAPH_URL"] = langgraph_url
        deployment.settings = deployment.settings.model_copy(
            update={"langgraph_url": langgraph_url}
        )
        yield deployment


@pytest.fixture
def silent_store() -> Iterator[str]:
    """The URL of a socket that accepts connections and never answers (a hung store)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _published(ops: Ops, client: SyncLangGraphClient) -> str:
    """Merge a first preference through reconcile; the content the store then holds."""
    ops.enqueue("I prefer green tea", key="preference.drink")
    assert ops("reconcile", "--user", ops.user).code == 0
    item = client.store.get_item(store_namespace(f"user:{ops.user}"), key="/preferences.md")
    return item_content(item["value"])


def _agent_edits(ops: Ops, client: SyncLangGraphClient, content: str) -> None:
    """What deepagents' ``edit_file`` writes: a FileData without memworker's marker."""
    value = {"content": content, "encoding": "utf-8"}
    client.store.put_item(store_namespace(f"user:{ops.user}"), "/preferences.md", value)


def test_an_agents_edit_appears_in_show_after_the_next_reconcile_with_no_scan(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    first = _published(ops, langgraph_client)
    _agent_edits(ops, langgraph_client, first + f"- {EDIT}\n")

    ran = ops("reconcile", "--user", ops.user, "--json")

    (done,) = ran.json()["namespaces"]
    assert (ran.code, done["outcome"]) == (0, "committed")
    assert EDIT in ops("show", "--user", ops.user).out
    stored = langgraph_client.store.get_item(
        store_namespace(f"user:{ops.user}"), key="/preferences.md"
    )
    assert item_content(stored["value"]) == ops.store.current_files(f"user:{ops.user}")[PREFS]


def test_an_agents_edit_is_merged_in_the_workers_next_batch_of_that_namespace(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    first = _published(ops, langgraph_client)
    _agent_edits(ops, langgraph_client, first + f"- {EDIT}\n")
    ops.enqueue("Remember that my cat is called Miso")
    claim = ops.queue.claim_namespace(f"user:{ops.user}")
    assert claim is not None
    runtime = build_runtime(ops.settings)
    try:
        result = runtime.pipeline.consolidate(claim)
    finally:
        runtime.close()

    assert (result.outcome, result.candidates) == ("committed", 2)
    shown = ops("show", "--user", ops.user).out
    assert EDIT in shown
    assert "Miso" in shown


def test_the_same_edit_is_absorbed_once_across_reconciles_and_a_scan(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    namespace = f"user:{ops.user}"
    first = _published(ops, langgraph_client)
    _agent_edits(ops, langgraph_client, first + f"- {EDIT}\n")
    assert ops("reconcile", "--user", ops.user).code == 0
    history = ops.store.file_history(namespace, PREFS)
    runs = ops.store.runs(namespace=namespace)

    again = ops("reconcile", "--user", ops.user, "--json")
    scan = ops("scan", "--user", ops.user, "--json")
    after_scan = ops("reconcile", "--user", ops.user, "--json")

    assert [d["outcome"] for d in again.json()["namespaces"]] == ["nothing_pending"]
    assert scan.json()["agent_edits"] == 0
    assert [d["outcome"] for d in after_scan.json()["namespaces"]] == ["nothing_pending"]
    assert ops.store.file_history(namespace, PREFS) == history
    assert ops.store.runs(namespace=namespace) == runs
    assert ops.store.current_files(namespace)[PREFS].count(EDIT) == 1


def test_a_store_that_does_not_answer_fails_no_reconcile_and_the_edit_comes_next_time(
    ops: Ops, langgraph_client: SyncLangGraphClient, silent_store: str
) -> None:
    namespace = f"user:{ops.user}"
    first = _published(ops, langgraph_client)
    _agent_edits(ops, langgraph_client, first + f"- {EDIT}\n")
    ops.enqueue("Remember that my cat is called Miso")

    hung = ops("reconcile", "--user", ops.user, "--json", MEMWORKER_LANGGRAPH_URL=silent_store)

    (done,) = hung.json()["namespaces"]
    # The batch is committed without the edit; only its delivery to the hung store is left
    # to the workers' retries (reconcile's exit code says so, as for any failed delivery).
    assert (done["outcome"], done["candidates"]) == ("committed", 1)
    assert "delivery(ies) failed" in hung.err
    assert "Miso" in ops("show", "--user", ops.user).out
    assert EDIT not in ops.store.current_files(namespace)[PREFS]

    back = ops("reconcile", "--user", ops.user, "--json")

    (done,) = back.json()["namespaces"]
    assert (back.code, done["outcome"]) == (0, "committed")
    assert EDIT in ops("show", "--user", ops.user).out


@pytest.mark.parametrize("extra_env", [{"MEMWORKER_FILE_BUDGET_BYTES": "256"}])
def test_the_pointer_line_of_an_over_budget_file_is_never_absorbed(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    namespace = f"user:{ops.user}"
    for n in range(20):
        ops.enqueue(f"I prefer seat number {n}", topic="preferences")
    assert ops("reconcile", "--user", ops.user).code == 0
    published = ops.store.current_files(namespace)[PREFS]
    (pointer,) = [line for line in published.splitlines() if is_pointer_line(line)]
    _agent_edits(
        ops, langgraph_client, published.replace(pointer, pointer_line(99)) + f"- {EDIT}\n"
    )

    ran = ops("reconcile", "--user", ops.user, "--json")

    (done,) = ran.json()["namespaces"]
    assert (done["outcome"], done["candidates"]) == ("committed", 1)
    current = ops.store.current_files(namespace)[PREFS]
    assert pointer_line(99) not in current
    assert [line for line in current.splitlines() if "more memories not shown" in line] == [
        line for line in current.splitlines() if is_pointer_line(line)
    ]


def test_an_agents_dump_over_the_line_bound_is_refused_recorded_and_published_over(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    namespace = f"user:{ops.user}"
    first = _published(ops, langgraph_client)
    dump = first + "".join(f"- dumped fact {i}\n" for i in range(DUMP_LINES))
    _agent_edits(ops, langgraph_client, dump)
    ops.enqueue("I prefer window seats", topic="preferences")

    ran = ops("reconcile", "--user", ops.user, "--json")

    (done,) = ran.json()["namespaces"]
    assert (ran.code, done["outcome"], done["candidates"]) == (0, "committed", 1)
    record = load_record(ops.store, namespace, PREFS)
    assert record is not None
    assert record.state == "restored"  # refused, then published over by the delivery
    assert f"lines, more than {MAX_EDIT_LINES}" in record.reason
    current = ops.store.current_files(namespace)[PREFS]
    assert "dumped fact" not in current
    assert "window seats" in current
    stored = langgraph_client.store.get_item(store_namespace(namespace), key="/preferences.md")
    assert item_content(stored["value"]) == current  # memworker's version is back


@pytest.mark.parametrize("extra_env", [{"MEMWORKER_MAX_PENDING_PER_NAMESPACE": "3"}])
def test_an_agents_edit_counts_against_the_pending_cap_and_the_rest_joins_a_later_batch(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    first = _published(ops, langgraph_client)
    added = [f"allergic to food number {i}" for i in range(5)]
    _agent_edits(ops, langgraph_client, first + "".join(f"- {a}\n" for a in added))
    ops.enqueue("Remember that my cat is called Miso")

    capped = ops("reconcile", "--user", ops.user, "--json")
    rest = ops("reconcile", "--user", ops.user, "--json")

    batches = [
        (d["outcome"], d["candidates"]) for r in (capped, rest) for d in r.json()["namespaces"]
    ]
    assert batches == [("committed", 3), ("committed", 3)]
    shown = ops("show", "--user", ops.user).out
    assert [a for a in added if a in shown] == added


@pytest.mark.parametrize("extra_env", [{"MEMWORKER_MAX_PENDING_PER_NAMESPACE": "3"}])
def test_a_pending_edit_of_a_user_whose_backlog_is_full_fails_no_scan_and_waits(
    ops: Ops, langgraph_client: SyncLangGraphClient
) -> None:
    namespace = f"user:{ops.user}"
    first = _published(ops, langgraph_client)
    _agent_edits(ops, langgraph_client, first + f"- {EDIT}\n- allergic to shellfish\n")
    for n in range(3):  # the batch that records the edit leaves it no room
        ops.enqueue(f"Remember that seat {n} is mine")
    assert ops("reconcile", "--user", ops.user).code == 0
    record = load_record(ops.store, namespace, PREFS)
    assert record is not None
    assert record.state == "pending"
    for n in range(3):  # full again
        ops.enqueue(f"Remember that locker {n} is mine")

    scan = ops("scan", "--user", ops.user, "--json")

    assert scan.code == 0, scan.err
    assert scan.json()["agent_edits"] == 0
    (aside,) = scan.json()["set_aside"]
    assert (aside["namespace"], aside["item"]) == (namespace, PREFS)
    assert "pending candidates (limit 3)" in aside["reason"]
    again = load_record(ops.store, namespace, PREFS)
    assert again is not None
    assert again.state == "pending"  # enqueued by a later scan or joins a later batch
