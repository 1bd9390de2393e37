"""``memworker reconcile --all`` says how many deliveries it published and how many are left."""

from __future__ import annotations

from tests.test_cli_support import Ops, ops

__all__ = ["ops"]


def test_reconcile_all_reports_what_it_published_and_what_is_left_undelivered(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer black coffee", user=ops.user + "b")

    report = ops("reconcile", "--all", "--json").json()

    assert (report["published"], report["undelivered"]) == (2, 0)
