"""``memworker approvals``: changes to sensitive files wait for an operator's decision."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.test_cli_support import Ops, make_ops

HEALTH = "/memories/health.md"


@pytest.fixture
def ops(
    database_url: str, redis_url: str, key_prefix: str, tmp_path: Path, redis_client: redis.Redis
) -> Iterator[Ops]:
    """A deployment where changes to health.md need approval."""
    yield from make_ops(
        database_url=database_url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        data_dir=tmp_path / "data",
        client=redis_client,
        MEMWORKER_SENSITIVE_PATHS=f'["{HEALTH}"]',
    )


def _waiting(ops: Ops) -> int:
    """Reconcile a health fact; returns the id of the approval it waits in."""
    ops.enqueue("I am allergic to peanuts", topic="health")
    ops("reconcile", "--user", ops.user)
    (approval,) = ops.store.pending_approvals(namespace=f"user:{ops.user}")
    return approval.id


def test_a_sensitive_change_waits_and_is_listed(ops: Ops) -> None:
    approval_id = _waiting(ops)

    ran = ops("approvals", "list", "--user", ops.user, "--json")

    ((listed),) = ran.json()
    assert (listed["id"], listed["path"], listed["operation"]["op"]) == (
        approval_id,
        HEALTH,
        "add",
    )
    assert HEALTH not in ops.store.current_files(f"user:{ops.user}")


def test_approve_applies_the_operation_as_a_new_version_and_publishes_it(ops: Ops) -> None:
    approval_id = _waiting(ops)

    ran = ops("approvals", "approve", str(approval_id), "--by", "operator:kim")

    ns = f"user:{ops.user}"
    assert ran.code == 0
    assert "- I am allergic to peanuts" in ops.store.current_files(ns)[HEALTH]
    assert ops.store.pending_approvals(namespace=ns) == []
    published = ops.sink_file(f"user/{ops.user}/_default", HEALTH)
    assert "peanuts" in published.read_text()


def test_approve_settles_the_ledger_row_of_the_candidate(ops: Ops) -> None:
    approval_id = _waiting(ops)

    ops("approvals", "approve", str(approval_id))

    (row,) = ops.store.export_namespace(f"user:{ops.user}")["ledger"]
    assert row["outcome"] == "merged"


def test_approving_twice_exits_3_and_applies_once(ops: Ops) -> None:
    approval_id = _waiting(ops)
    ops("approvals", "approve", str(approval_id))

    again = ops("approvals", "approve", str(approval_id))

    assert again.code == 3
    assert "is not pending" in again.err
    content = ops.store.current_files(f"user:{ops.user}")[HEALTH]
    assert content.count("peanuts") == 1


def test_reject_leaves_the_file_unwritten(ops: Ops) -> None:
    approval_id = _waiting(ops)

    ran = ops("approvals", "reject", str(approval_id))

    ns = f"user:{ops.user}"
    assert ran.code == 0
    assert HEALTH not in ops.store.current_files(ns)
    assert ops.store.export_namespace(ns)["ledger"][0]["outcome"] == "rejected"


def test_approving_an_unknown_id_exits_3(ops: Ops) -> None:
    ran = ops("approvals", "approve", "987654321")

    assert ran.code == 3
    assert "does not exist" in ran.err


def test_an_approved_forget_applies_though_its_candidate_left_the_queue(ops: Ops) -> None:
    ops("approvals", "approve", str(_waiting(ops)), "--by", "operator:kim")
    ops.enqueue("forget that I am allergic to peanuts", kind="forget")
    ops("reconcile", "--user", ops.user)
    (forget,) = ops.store.pending_approvals(namespace=f"user:{ops.user}")

    ran = ops("approvals", "approve", str(forget.id), "--by", "operator:kim")

    assert ran.code == 0, ran.err
    assert "peanuts" not in ops.store.current_files(f"user:{ops.user}").get(HEALTH, "")
