"""A command that publishes exits 1 when a delivery failed (the exit-code table), whatever the
command and output format; what it committed stays committed and the workers retry."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]

POLICY = "# Compliance\n\n- Never store card numbers.\n"


def _broken_files_sink(tmp_path: Path) -> dict[str, str]:
    """Env whose files sink lives under a regular file: every delivery fails (an OS error)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    return {"MEMWORKER_FILES_DIR": str(blocker / "files")}


def _policy(tmp_path: Path) -> str:
    source = tmp_path / "compliance.md"
    source.write_text(POLICY)
    return str(source)


@pytest.mark.parametrize("as_json", [[], ["--json"]], ids=["text", "json"])
def test_a_put_whose_delivery_failed_exits_1_with_the_file_committed(
    ops: Ops, tmp_path: Path, as_json: list[str]
) -> None:
    org = "acme-" + ops.user
    args = ["put", "--org", org, "--path", "policies/compliance.md", _policy(tmp_path), *as_json]

    ran = ops(*args, **_broken_files_sink(tmp_path))

    assert ran.code == 1
    assert "delivery(ies) failed" in ran.err
    assert ops.store.current_files(f"org:{org}")["/memories/policies/compliance.md"] == POLICY


def test_a_put_whose_delivery_succeeded_exits_0(ops: Ops, tmp_path: Path) -> None:
    ran = ops("put", "--org", "acme-" + ops.user, "--path", "p", _policy(tmp_path))

    assert (ran.code, ran.err) == (0, "")


def test_a_reconcile_whose_delivery_failed_exits_1(ops: Ops, tmp_path: Path) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, **_broken_files_sink(tmp_path))

    assert ran.code == 1
    assert f"user:{ops.user}: committed namespace revision 1" in " ".join(ran.out.split())
    assert "delivery(ies) failed" in ran.err


def test_a_rollback_whose_delivery_failed_exits_1(ops: Ops, tmp_path: Path) -> None:
    ops.enqueue("I prefer green tea")
    ops("reconcile", "--user", ops.user)
    ops.enqueue("I prefer short answers")
    ops("reconcile", "--user", ops.user)

    ran = ops(
        "rollback", "--user", ops.user, "--path", "preferences", "--to", "1", "--yes",
        **_broken_files_sink(tmp_path),
    )  # fmt: skip

    assert ran.code == 1
    assert "delivery(ies) failed" in ran.err


def _unreachable_store() -> dict[str, str]:
    """Env adding the LangGraph store sink, at an address where nothing listens."""
    return {
        "MEMWORKER_SINKS": '["files", "langgraph"]',
        "MEMWORKER_LANGGRAPH_URL": "http://127.0.0.1:9",
    }


def test_a_store_delivery_that_failed_is_never_reported_as_published(ops: Ops) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, **_unreachable_store())

    last = " ".join(ran.out.split()).rpartition("summary:")[2]
    assert ran.code == 1
    assert "published 1 item(s) to files;" in last
    assert "langgraph took nothing" in last
    assert "to files, langgraph" not in last


def test_a_publish_where_no_sink_took_anything_does_not_say_published(
    ops: Ops, tmp_path: Path
) -> None:
    ops.enqueue("I prefer green tea")

    ran = ops("reconcile", "--user", ops.user, **_broken_files_sink(tmp_path))

    assert "published" not in ran.out
    assert "no sink took anything; 1 delivery(ies) failed" in " ".join(ran.out.split())
