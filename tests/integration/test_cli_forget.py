"""``memworker forget``: a user erased from Redis, every SQL table and the files sink."""

from __future__ import annotations

import sqlalchemy as sa

from tests.integration.test_cli_support import Ops, ops, redis_keys
from worker.store.schema import metadata

__all__ = ["ops"]


def _remember_everywhere(ops: Ops) -> None:
    """Memory with and without an assistant, a file in the sink, and a candidate still queued."""
    ops.enqueue("I prefer green tea")
    ops.enqueue("I prefer short answers", assistant_id="bot")
    ops("reconcile", "--all")
    ops.enqueue("Remember that my cat is called Miso")


def _sql_mentions(ops: Ops, needle: str) -> list[str]:
    hits = []
    with ops.store.engine.connect() as conn:
        for table in metadata.sorted_tables:
            for row in conn.execute(sa.select(table)):
                if needle in repr(tuple(row)):
                    hits.append(table.name)
    return hits


def test_forget_all_assistants_leaves_no_trace_in_any_store(ops: Ops) -> None:
    _remember_everywhere(ops)

    ran = ops("forget", "--user", ops.user, "--all-assistants", "--yes")

    assert ran.code == 0
    assert [k for k in redis_keys(ops.redis, ops.settings.key_prefix) if ops.user in k] == []
    assert _sql_mentions(ops, ops.user) == []
    assert [p for p in ops.files_dir.rglob("*") if ops.user in str(p)] == []


def test_forget_reports_what_it_removed(ops: Ops) -> None:
    _remember_everywhere(ops)

    ran = ops("forget", "--user", ops.user, "--all-assistants", "--yes", "--json")

    report = ran.json()
    assert report["namespaces"] == [f"user:{ops.user}", f"user:{ops.user}:bot"]
    assert report["queued_candidates"] == {f"user:{ops.user}": 1, f"user:{ops.user}:bot": 0}
    assert report["sql_rows"]["file_versions"] == 2
    assert report["sink_deletions"] == 2


def test_forget_one_assistant_keeps_the_others(ops: Ops) -> None:
    _remember_everywhere(ops)

    ops("forget", "--user", ops.user, "--assistant", "bot", "--yes")

    assert ops.store.namespaces(user_id=ops.user) == [f"user:{ops.user}"]


def test_forget_answered_no_erases_nothing_and_exits_0(ops: Ops) -> None:
    _remember_everywhere(ops)

    ran = ops("forget", "--user", ops.user, "--all-assistants", input="n\n")

    assert ran.code == 0
    assert "nothing was changed" in ran.err
    assert len(ops.store.namespaces(user_id=ops.user)) == 2


def test_forget_with_no_answer_and_no_yes_is_a_usage_error_that_erases_nothing(ops: Ops) -> None:
    _remember_everywhere(ops)

    ran = ops("forget", "--user", ops.user, "--all-assistants")  # end of input: no terminal

    assert ran.code == 2
    assert "pass --yes" in " ".join(ran.err.split())
    assert len(ops.store.namespaces(user_id=ops.user)) == 2


def test_forget_of_a_namespace_a_worker_holds_erases_nothing(ops: Ops) -> None:
    _remember_everywhere(ops)
    ops.queue.claim_namespace(f"user:{ops.user}")

    ran = ops("forget", "--user", ops.user, "--yes")

    assert ran.code == 1
    assert "being consolidated by a worker" in " ".join(ran.out.split())
    assert f"user:{ops.user}" in ops.store.namespaces(user_id=ops.user)


def test_forget_of_an_unknown_user_exits_3(ops: Ops) -> None:
    ran = ops("forget", "--user", ops.user, "--yes")

    assert ran.code == 3
    assert "nothing to forget" in ran.err


def test_forget_of_a_user_of_one_org_keeps_the_same_id_in_another_org_and_in_none(
    ops: Ops,
) -> None:
    for org in ("acme", "globex", None):
        ops.enqueue(f"I prefer green tea ({org})", org_id=org)
    ops("reconcile", "--all")

    ran = ops("forget", "--user", ops.user, "--org", "acme", "--all-assistants", "--yes")

    assert ran.code == 0
    assert sorted(ops.store.namespaces(user_id=ops.user)) == [
        f"org:globex:user:{ops.user}",
        f"user:{ops.user}",
    ]
    assert [p for p in ops.files_dir.rglob("*.md") if "acme" in str(p)] == []
    assert len([p for p in ops.files_dir.rglob("*.md") if ops.user in str(p)]) == 2
