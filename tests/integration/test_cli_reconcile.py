"""``memworker reconcile``: by hand, through the workers' claim and fence, then published."""

from __future__ import annotations

import socket

import pytest

from tests.conftest import PG_SERVER_URL
from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]


def test_reconcile_commits_pending_candidates_and_publishes_the_file(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink")

    ran = ops("reconcile", "--user", ops.user, "--json")

    (done,) = ran.json()["namespaces"]
    assert (ran.code, done["outcome"], done["counts"]["added"]) == (0, "committed", 1)
    published = ops.sink_file(f"user/{ops.user}/_default", "/memories/preferences.md")
    assert "- I prefer green tea" in published.read_text()


def test_reconcile_prints_the_diff_and_a_summary(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink")

    ran = ops("reconcile", "--user", ops.user)

    assert ran.code == 0
    assert "+- I prefer green tea" in ran.out
    assert "summary: 1 namespace(s): committed 1; 1 candidate(s): added 1" in " ".join(
        ran.out.split()
    )


def test_reconcile_dry_run_changes_nothing_anywhere(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops("reconcile", "--user", ops.user)
    ops.enqueue("I prefer black coffee", key="preference.drink")
    layout = ops.queue.layout
    before = (
        ops.store.export_namespace(ns),
        ops.store.runs(namespace=ns),
        ops.queue.admin.namespace_state(ns),
        ops.redis.zscore(layout.due(layout.shard(ns)), ns),
        ops.redis.hgetall(layout.meta(ns)),
        sorted(p.name for p in ops.files_dir.rglob("*")),
    )

    ran = ops("reconcile", "--user", ops.user, "--dry-run")

    after = (
        ops.store.export_namespace(ns),
        ops.store.runs(namespace=ns),
        ops.queue.admin.namespace_state(ns),
        ops.redis.zscore(layout.due(layout.shard(ns)), ns),
        ops.redis.hgetall(layout.meta(ns)),
        sorted(p.name for p in ops.files_dir.rglob("*")),
    )
    assert ran.code == 0
    assert "+- I prefer black coffee" in ran.out
    assert after == before


def test_reconcile_reports_a_namespace_a_worker_holds_and_merges_each_candidate_once(
    ops: Ops,
) -> None:
    ns = f"user:{ops.user}"
    first = ops.enqueue("I prefer green tea", key="preference.drink")
    worker_claim = ops.queue.claim_namespace(ns)  # another worker is merging this batch now
    assert worker_claim is not None
    second = ops.enqueue("Remember that my cat is called Miso")

    during = ops("reconcile", "--user", ops.user, "--json")
    runtime = ops.runtime()
    try:
        assert runtime.pipeline.consolidate(worker_claim).outcome == "committed"
    finally:
        runtime.close()
    after = ops("reconcile", "--user", ops.user, "--json")

    assert (during.code, during.json()["namespaces"][0]["outcome"]) == (0, "leased")
    assert after.json()["namespaces"][0]["candidates"] == 1
    ledger = [row["candidate_id"] for row in ops.store.export_namespace(ns)["ledger"]]
    assert sorted(ledger) == sorted([first, second])
    content = ops.store.current_files(ns)
    assert sum(text.count("green tea") + text.count("Miso") for text in content.values()) == 2


def test_reconcile_says_in_words_that_a_worker_holds_the_namespace(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops.queue.claim_namespace(f"user:{ops.user}")

    ran = ops("reconcile", "--user", ops.user)

    assert ran.code == 0
    assert "being consolidated by a worker now" in " ".join(ran.out.split())


def test_reconcile_all_consolidates_every_pending_namespace(ops: Ops) -> None:
    other = ops.user + "b"
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer black coffee", user=other)

    ran = ops("reconcile", "--all", "--json")

    outcomes = {d["namespace"]: d["outcome"] for d in ran.json()["namespaces"]}
    assert outcomes == {f"user:{ops.user}": "committed", f"user:{other}": "committed"}


def test_reconcile_of_an_unknown_user_exits_3(ops: Ops) -> None:
    ran = ops("reconcile", "--user", "nobody-" + ops.user)

    assert ran.code == 3
    assert ran.err.startswith("error: user:nobody-")
    assert "is unknown" in ran.err


@pytest.mark.parametrize("since", ["6x", "h", "0h", "-1h", "6 h", "1.5h", "2d2d"])
def test_reconcile_refuses_a_malformed_since_in_one_line(ops: Ops, since: str) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, "--since", since)

    assert ran.code == 2
    assert len(ran.err.strip().splitlines()) == 1
    assert "e.g. 30m, 6h, 2d" in ran.err or "positive duration" in ran.err
    assert ops.queue.admin.namespace_state(f"user:{ops.user}").pending == 1


@pytest.mark.parametrize("since", ["99999999w", "521w", "3641d", "87361h", "9" * 5000 + "s"])
def test_reconcile_refuses_a_since_beyond_the_allowed_range_in_one_line(
    ops: Ops, since: str
) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, "--since", since)

    assert ran.code == 2
    assert len(ran.err.strip().splitlines()) == 1
    assert "--since" in ran.err
    assert "out of range: give 1s to 520w" in ran.err
    assert "Traceback" not in ran.out + ran.err
    assert ops.queue.admin.namespace_state(f"user:{ops.user}").pending == 1


def test_reconcile_since_takes_the_longest_allowed_duration(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, "--since", "520w")

    assert ran.code == 0
    assert f"user:{ops.user}: committed namespace revision 1" in " ".join(ran.out.split())


def test_reconcile_since_says_when_no_source_is_configured_and_still_drains(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, "--since", "6h")

    text = " ".join(ran.out.split())
    assert ran.code == 0
    assert "no source configured (MEMWORKER_LANGGRAPH_URL is unset)" in text
    assert f"user:{ops.user}: committed namespace revision 1" in text


def test_reconcile_refuses_all_together_with_a_user(ops: Ops) -> None:
    ran = ops("reconcile", "--all", "--user", ops.user)

    assert ran.code == 2
    assert "either --all or one namespace" in ran.err


def test_reconcile_without_a_target_names_the_targets_it_accepts(ops: Ops) -> None:
    ran = ops("reconcile")

    assert ran.code == 2
    assert "--all" in ran.err
    assert "--org O" in ran.err


def test_reconcile_of_a_dead_lettered_namespace_points_at_dlq_retry(ops: Ops) -> None:
    ns = f"user:{ops.user}"
    ops.enqueue("I prefer green tea")
    for _ in range(ops.settings.max_attempts):
        claim = ops.queue.claim_namespace(ns)
        assert claim is not None
        ops.queue.fail(claim, "model provider timed out")

    ran = ops("reconcile", "--user", ops.user)

    assert ran.code == 1
    assert f"memworker dlq retry {ns}" in " ".join(ran.out.split())


def test_reconcile_with_redis_unreachable_exits_4_without_a_traceback(ops: Ops) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    ran = ops("reconcile", "--all", MEMWORKER_REDIS_URL=f"redis://127.0.0.1:{port}/0")

    assert ran.code == 4
    assert "is unreachable" in ran.err
    assert "Traceback" not in ran.err + ran.out


def test_reconcile_with_a_missing_database_exits_4(ops: Ops) -> None:
    from sqlalchemy.engine import make_url

    missing = make_url(PG_SERVER_URL).set(database="mw_no_such_database").render_as_string(False)

    ran = ops("reconcile", "--user", ops.user, MEMWORKER_DATABASE_URL=missing)

    assert ran.code == 4
    assert ran.err.startswith("error: could not reach the database")
