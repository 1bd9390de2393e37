"""``memworker publish``: the current files delivered again, through the outbox, to every
configured sink or one; the case it is for is a sink added after memory was merged."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.test_cli_support import Ops, make_ops, ops

__all__ = ["ops"]

#: A deployment that published to no sink when the memory was merged.
NO_SINK = {"MEMWORKER_SINKS": "[]"}
PREFERENCES = "/memories/preferences.md"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _merged_without_sinks(ops: Ops, *users: str) -> None:
    for user in users:
        ops.enqueue("I prefer green tea", user=user)
        assert ops("reconcile", "--user", user, **NO_SINK).code == 0


def test_a_sink_added_after_the_merge_gets_the_files_when_published(ops: Ops) -> None:
    _merged_without_sinks(ops, ops.user)
    copy = ops.sink_file(f"user/{ops.user}/_default", PREFERENCES)
    assert not copy.exists()

    ran = ops("publish", "--user", ops.user)

    assert ran.code == 0, ran.err
    assert "- I prefer green tea" in copy.read_text()
    assert "published 1 item(s) to files" in _one_line(ran.out)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def lone_ops(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    redis_url: str,
    key_prefix: str,
    redis_client: redis.Redis,
) -> Iterator[Ops]:
    """The CLI on a database of its own: ``--all`` sees no other test's namespaces."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'lone.sqlite3'}"
    else:
        url = request.getfixturevalue("empty_pg_database_url")
    yield from make_ops(
        database_url=url, redis_url=redis_url, key_prefix=key_prefix,
        data_dir=tmp_path / "data", client=redis_client,
    )  # fmt: skip


def test_publish_all_publishes_every_namespace_with_memory(lone_ops: Ops) -> None:
    ops = lone_ops
    other = ops.user + "b"
    _merged_without_sinks(ops, ops.user, other)

    report = ops("publish", "--all", "--json").json()

    assert {f"user:{ops.user}", f"user:{other}"} == set(report["namespaces"])
    assert ops.sink_file(f"user/{other}/_default", PREFERENCES).exists()
    assert report["published_to"] == ["files"]
    assert report["undelivered"] == 0


def test_publish_to_one_sink_restores_a_copy_it_lost(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops("reconcile", "--user", ops.user)
    copy = ops.sink_file(f"user/{ops.user}/_default", PREFERENCES)
    copy.unlink()

    ran = ops("publish", "--namespace", f"user:{ops.user}", "--sink", "files")

    assert ran.code == 0, ran.err
    assert "- I prefer green tea" in copy.read_text()


def test_publish_to_a_sink_that_is_not_configured_is_refused(ops: Ops) -> None:
    ran = ops("publish", "--all", "--sink", "langgraph")

    assert ran.code == 2
    assert "--sink 'langgraph' is not configured here" in _one_line(ran.err)


def test_publish_of_a_namespace_without_memory_is_not_found(ops: Ops) -> None:
    ran = ops("publish", "--user", ops.user)

    assert ran.code == 3
    assert "has no memory" in ran.err


def test_publish_with_fewer_sinks_than_the_workers_refuses(ops: Ops) -> None:
    ops.queue.admin.record_sinks(["files", "langgraph"])

    ran = ops("publish", "--all")

    assert ran.code == 2
    assert "langgraph would never receive" in _one_line(ran.err)


def test_publish_whose_delivery_failed_exits_1_and_says_so(ops: Ops, tmp_path: Path) -> None:
    _merged_without_sinks(ops, ops.user)
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")

    ran = ops("publish", "--user", ops.user, MEMWORKER_FILES_DIR=str(blocker / "files"))

    assert ran.code == 1
    assert "published" not in ran.out
    assert "1 delivery(ies) failed" in _one_line(ran.out)


def test_publish_twice_delivers_the_current_version_again(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops("reconcile", "--user", ops.user)
    ops("publish", "--user", ops.user)

    report = ops("publish", "--user", ops.user, "--json").json()

    assert (report["queued"], report["published"], report["undelivered"]) == (1, 1, 0)


def test_publish_prints_no_progress_bar_when_not_on_a_terminal(ops: Ops) -> None:
    _merged_without_sinks(ops, ops.user)

    assert ops("publish", "--all").err == ""


def test_queueing_again_takes_only_each_files_current_version(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")
    ops("reconcile", "--user", ops.user, **NO_SINK)
    ops.enqueue("I prefer black coffee")
    ops("reconcile", "--user", ops.user, **NO_SINK)

    queued = ops.store.requeue_current(f"user:{ops.user}", sinks=["added"])
    (due,) = ops.store.due_outbox(sink="added")

    assert queued == 1
    assert (due.path, due.version) == (PREFERENCES, 2)
    assert "black coffee" in due.content
