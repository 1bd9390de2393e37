"""``memworker reconcile --all`` says how many deliveries it published and how many are left."""

from __future__ import annotations

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]


def test_reconcile_all_reports_what_it_published_and_what_is_left_undelivered(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer black coffee", user=ops.user + "b")

    report = ops("reconcile", "--all", "--json").json()

    assert (report["published"], report["undelivered"]) == (2, 0)


def _corrupt_entry(ops: Ops, namespace: str) -> None:
    """A log entry no release can read (a bad write by hand, a truncated restore)."""
    ops.queue.redis.xadd(ops.queue.layout.log(namespace), {"c": "{not json", "i": "broken"})


def test_reconcile_all_dry_run_sets_aside_a_namespace_it_cannot_read_and_previews_the_others(
    ops: Ops,
) -> None:
    broken = ops.user + "x"
    ops.enqueue("I prefer green tea", user=broken)
    _corrupt_entry(ops, f"user:{broken}")
    ops.enqueue("I prefer black coffee")

    ran = ops("reconcile", "--all", "--dry-run", "--json")

    outcomes = {r["namespace"]: r for r in ran.json()["namespaces"]}
    assert outcomes[f"user:{ops.user}"]["outcome"] == "dry_run"
    assert outcomes[f"user:{broken}"]["outcome"] == "failed"
    assert "set aside" in outcomes[f"user:{broken}"]["note"]
    assert "not a valid candidate" in outcomes[f"user:{broken}"]["note"]
    assert ran.code == 1  # something was left undone, and said so


def test_reconcile_all_commits_and_publishes_the_others_beside_a_namespace_that_fails(
    ops: Ops,
) -> None:
    broken = ops.user + "x"
    ops.enqueue("I prefer green tea", user=broken)
    _corrupt_entry(ops, f"user:{broken}")
    ops.enqueue("I prefer black coffee")

    report = ops("reconcile", "--all", "--json").json()

    outcomes = {r["namespace"]: r["outcome"] for r in report["namespaces"]}
    assert outcomes == {f"user:{ops.user}": "committed", f"user:{broken}": "failed"}
    assert (report["published"], report["undelivered"]) == (1, 0)
