"""``memworker dlq retry --all``: bring every dead letter back at once, or those whose last
error matches, after an outage dead-lettered many namespaces."""

from __future__ import annotations

from tests.integration.test_cli_dlq import _dead
from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]


def test_dlq_retry_all_brings_every_dead_letter_back(ops: Ops) -> None:
    dead = [_dead(ops, "database unreachable", user=f"{ops.user}-{i}") for i in range(3)]

    ran = ops("dlq", "retry", "--all")

    assert ran.code == 0, ran.err
    assert "3 namespace(s) back in the queue" in ran.out
    assert all(not ops.queue.admin.namespace_state(ns).dead for ns in dead)


def test_dlq_retry_all_with_an_error_filter_leaves_the_other_dead_letters(ops: Ops) -> None:
    outage = _dead(ops, "could not reach the database: connection refused", user=f"{ops.user}-a")
    poison = _dead(ops, "consolidation plan rejected: bad entry", user=f"{ops.user}-b")

    ran = ops("dlq", "retry", "--all", "--error-contains", "CONNECTION REFUSED")

    assert ran.code == 0, ran.err
    assert "1 other dead letter(s) left" in ran.out
    assert not ops.queue.admin.namespace_state(outage).dead
    assert ops.queue.admin.namespace_state(poison).dead


def test_dlq_retry_needs_a_namespace_or_all(ops: Ops) -> None:
    ran = ops("dlq", "retry")

    assert ran.code == 2
    assert "--all" in ran.err
