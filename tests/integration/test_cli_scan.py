"""``memworker scan``: the nightly source scan, now, for everyone or one namespace.

Against a real LangGraph API server (``langgraph dev``) where conversations ran, real Redis
and each database; the scan is the same use case the ``scan_sources`` schedule runs.
"""

from __future__ import annotations

import uuid

import pytest
from langgraph_sdk.client import SyncLangGraphClient

from tests.integration.test_cli_support import Ops, ops
from tests.langgraph_fixtures import converse, langgraph_client, langgraph_url

__all__ = ["langgraph_client", "langgraph_url", "ops"]


def test_scan_without_a_source_says_what_to_set_in_one_line_and_exits_2(ops: Ops) -> None:
    ran = ops("scan", "--user", ops.user)

    assert ran.code == 2
    assert ran.err.strip().splitlines() == [
        "error: no source to scan: MEMWORKER_LANGGRAPH_URL is unset (the LangGraph server "
        "whose threads, inbox and store memworker reads); set it and scan again"
    ]


def test_scan_refuses_a_malformed_since(ops: Ops) -> None:
    ran = ops("scan", "--since", "yesterday")

    assert ran.code == 2
    assert "--since 'yesterday' is not a duration" in ran.err


@pytest.mark.langgraph
def test_scan_of_one_user_queues_that_users_conversations_only_and_marks_them_due(
    ops: Ops, langgraph_client: SyncLangGraphClient, langgraph_url: str, key_prefix: str
) -> None:
    alice, bob = (f"u-{name}-{uuid.uuid4().hex[:8]}" for name in ("alice", "bob"))
    converse(langgraph_client, key_prefix, alice, "I prefer tea")
    converse(langgraph_client, key_prefix, bob, "I live in Oslo")

    ran = ops("scan", "--user", alice, "--json", MEMWORKER_LANGGRAPH_URL=langgraph_url)

    report = ran.json()
    assert ran.code == 0, ran.err
    assert list(report["namespaces"]) == [f"user:{alice}"]
    assert report["namespaces"][f"user:{alice}"] >= 1
    assert ops.queue.admin.namespace_state(f"user:{alice}").pending >= 1


@pytest.mark.langgraph
def test_a_second_scan_finds_nothing_new_and_a_dry_run_moves_no_cursor(
    ops: Ops, langgraph_client: SyncLangGraphClient, langgraph_url: str, key_prefix: str
) -> None:
    carol = f"u-carol-{uuid.uuid4().hex[:8]}"
    converse(langgraph_client, key_prefix, carol, "Call me Caz")
    env = {"MEMWORKER_LANGGRAPH_URL": langgraph_url}

    preview = ops("scan", "--user", carol, "--dry-run", "--json", **env).json()
    first = ops("scan", "--user", carol, "--json", **env).json()
    second = ops("scan", "--user", carol, "--json", **env).json()

    assert preview["namespaces"] == first["namespaces"] != {}
    assert second["namespaces"] == {}
