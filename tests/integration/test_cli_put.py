"""``memworker put``: operators write shared, read-only memory files."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]

POLICY = "# Compliance\n\n- Never store card numbers.\n"


def _policy(tmp_path: Path) -> Path:
    source = tmp_path / "compliance.md"
    source.write_text(POLICY)
    return source


def test_put_writes_an_org_file_and_publishes_it(ops: Ops, tmp_path: Path) -> None:
    org = "acme-" + ops.user

    ran = ops(
        "put", "--org", org, "--path", "policies/compliance.md", str(_policy(tmp_path)),
        "--author", "kim",
    )  # fmt: skip

    history = ops.store.file_history(f"org:{org}", "/memories/policies/compliance.md")
    assert ran.code == 0
    assert [(v.content, v.author) for v in history] == [(POLICY, "operator:kim")]
    assert ops.sink_file(f"org/{org}", "/memories/policies/compliance.md").read_text() == POLICY


def test_put_makes_the_file_read_only_for_the_consolidator(ops: Ops, tmp_path: Path) -> None:
    bot = "bot-" + ops.user
    ops("put", "--assistant", bot, "--path", "preferences", str(_policy(tmp_path)))

    files = ops.store.list_files(f"agent:{bot}")

    assert [(f.path, f.operator_owned) for f in files] == [("/memories/preferences.md", True)]


def test_put_without_an_owner_exits_2(ops: Ops, tmp_path: Path) -> None:
    ran = ops("put", "--path", "policies/compliance.md", str(_policy(tmp_path)))

    assert ran.code == 2
    assert "--org ID or --assistant A" in ran.err


def test_put_of_a_missing_file_exits_2_in_one_line(ops: Ops, tmp_path: Path) -> None:
    ran = ops("put", "--org", "acme", "--path", "p", str(tmp_path / "nope.md"))

    assert ran.code == 2
    assert len(ran.err.strip().splitlines()) == 1
    assert "does not exist" in ran.err


def test_put_outside_the_memory_route_exits_2(ops: Ops, tmp_path: Path) -> None:
    ran = ops("put", "--org", "acme", "--path", "/etc/passwd", str(_policy(tmp_path)))

    assert ran.code == 2
    assert "outside /memories/" in ran.err


def test_put_of_an_endless_file_is_refused_without_reading_it_all(ops: Ops) -> None:
    ran = ops("put", "--org", "acme-" + ops.user, "--path", "p", "/dev/zero")

    assert ran.code == 2
    assert "/dev/zero is over" in ran.err


def test_put_of_an_empty_file_is_refused(ops: Ops) -> None:
    ran = ops("put", "--org", "acme-" + ops.user, "--path", "p", "/dev/null")

    assert ran.code == 2
    assert "/dev/null is empty" in ran.err
    assert ops.store.list_files(f"org:acme-{ops.user}") == []
