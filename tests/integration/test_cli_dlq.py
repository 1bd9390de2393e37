"""``memworker dlq``: list dead letters with their last error, retry or drop them."""

from __future__ import annotations

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]


def _dead(ops: Ops, error: str = "model provider timed out", *, user: str | None = None) -> str:
    """A namespace (of ``user``, default the test's) whose batch failed max_attempts times;
    returns its key."""
    ns = f"user:{user or ops.user}"
    ops.enqueue("I prefer green tea", user=user)
    for _ in range(ops.settings.max_attempts):
        claim = ops.queue.claim_namespace(ns)
        assert claim is not None
        ops.queue.fail(claim, error)
    return ns


def test_dlq_list_shows_each_dead_letter_with_its_last_error(ops: Ops) -> None:
    ns = _dead(ops)

    ran = ops("dlq", "list", "--json")

    ((letter),) = [d for d in ran.json() if d["namespace"] == ns]
    assert (letter["attempts"], letter["pending"], letter["last_error"]) == (
        ops.settings.max_attempts,
        1,
        "model provider timed out",
    )


def test_dlq_list_table_names_the_error(ops: Ops) -> None:
    _dead(ops, error="boom")

    ran = ops("dlq", "list")

    assert ran.code == 0
    assert "boom" in ran.out


def test_dlq_retry_brings_the_batch_back_and_reconcile_merges_it(ops: Ops) -> None:
    ns = _dead(ops)

    retried = ops("dlq", "retry", ns)
    merged = ops("reconcile", "--namespace", ns, "--json")

    assert retried.code == 0
    assert merged.json()["namespaces"][0]["outcome"] == "committed"
    assert ops.queue.admin.namespace_state(ns).pending == 0


def test_dlq_retry_of_a_healthy_namespace_exits_3(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("dlq", "retry", f"user:{ops.user}")

    assert ran.code == 3
    assert "is not dead-lettered" in ran.err


def test_dlq_drop_with_yes_deletes_the_pending_candidates(ops: Ops) -> None:
    ns = _dead(ops)

    ran = ops("dlq", "drop", ns, "--yes")

    assert ran.code == 0
    assert ops.queue.admin.namespace_state(ns).pending == 0
    assert ops.queue.admin.dead_letters() == []


def test_dlq_drop_without_an_answer_or_yes_keeps_everything_and_exits_2(ops: Ops) -> None:
    ns = _dead(ops)

    ran = ops("dlq", "drop", ns)

    assert ran.code == 2
    assert ops.queue.admin.namespace_state(ns).pending == 1


def test_dlq_drop_of_a_healthy_namespace_exits_3(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("dlq", "drop", f"user:{ops.user}", "--yes")

    assert ran.code == 3
    assert ops.queue.admin.namespace_state(f"user:{ops.user}").pending == 1


def test_dlq_with_a_malformed_namespace_exits_2(ops: Ops) -> None:
    ran = ops("dlq", "retry", "nonsense")

    assert ran.code == 2
    assert ran.err.startswith("error: namespace 'nonsense'")
