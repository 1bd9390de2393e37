"""``memworker store migrate-orgs``: org items leave the one namespace every org shared."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.integration.test_cli_support import Ops, ops
from tests.langgraph_fixtures import langgraph_client, langgraph_url
from worker.connectors.layout import StoreLayout

__all__ = ["langgraph_client", "langgraph_url", "ops"]

pytestmark = pytest.mark.langgraph

OLD_SHARED = ("_org", "_shared", "memories")
OLD_KEY = "/policies/compliance.md"
PATH = "/memories/policies/compliance.md"


def _put(ops: Ops, env: dict[str, str], org: str, text: str, tmp_path: Path) -> None:
    source = tmp_path / f"{org}.md"
    source.write_text(text)
    ran = ops("put", "--org", org, "--path", "policies/compliance.md", str(source), **env)
    assert ran.code == 0, ran.err


def test_a_dry_run_lists_the_moves_and_changes_nothing_then_the_migration_moves_them(
    ops: Ops, langgraph_url: str, langgraph_client: SyncLangGraphClient, tmp_path: Path
) -> None:
    env = {"MEMWORKER_SINKS": '["langgraph"]', "MEMWORKER_LANGGRAPH_URL": langgraph_url}
    acme, globex = f"acme-{ops.user}", f"globex-{ops.user}"
    _put(ops, env, acme, "- acme: no cold calls\n", tmp_path)
    _put(ops, env, globex, "- globex: audit all\n", tmp_path)
    # What the old layout left: one item for both orgs, holding whichever published last.
    langgraph_client.store.put_item(OLD_SHARED, OLD_KEY, {"content": "- globex: audit all\n"})
    layout = StoreLayout()

    dry = ops("store", "migrate-orgs", "--dry-run", "--json", **env)
    still_there = langgraph_client.store.get_item(OLD_SHARED, key=OLD_KEY)
    done = ops("store", "migrate-orgs", "--json", **env)

    assert dry.code == 0, dry.err
    planned = {
        m["namespace"]: m for m in dry.json() if m["namespace"] in {f"org:{acme}", f"org:{globex}"}
    }
    assert planned[f"org:{acme}"]["from"] == {"namespace": list(OLD_SHARED), "key": OLD_KEY}
    assert planned[f"org:{acme}"]["to"] == {"namespace": [acme, "_org", "memories"], "key": OLD_KEY}
    assert {m["outcome"] for m in planned.values()} == {"would move"}
    assert still_there["value"]["content"] == "- globex: audit all\n"
    assert done.code == 0, done.err
    for org, text in ((acme, "- acme: no cold calls\n"), (globex, "- globex: audit all\n")):
        item = langgraph_client.store.get_item(layout.namespace_for(f"org:{org}"), key=OLD_KEY)
        assert item["value"]["content"] == text
    assert langgraph_client.store.search_items(OLD_SHARED)["items"] == []


def test_migrating_without_the_langgraph_sink_exits_2(ops: Ops) -> None:
    ran = ops("store", "migrate-orgs", "--dry-run")

    assert ran.code == 2
    assert "langgraph sink is not configured" in ran.err
