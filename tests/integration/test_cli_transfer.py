"""``memworker export`` / ``import``: a namespace's files and history as JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]


def _history(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops("reconcile", "--user", ops.user)
    ops.enqueue("I prefer black coffee", key="preference.drink")
    ops("reconcile", "--user", ops.user)
    ops("rollback", "--user", ops.user, "--path", "preferences", "--to", "1", "--yes")


def test_export_then_import_into_a_fresh_database_round_trips_byte_for_byte(
    ops: Ops, tmp_path: Path
) -> None:
    _history(ops)
    exported = tmp_path / "export.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    fresh = {"MEMWORKER_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}"}

    imported = ops("import", str(exported), **fresh)
    again = ops("export", "--user", ops.user, **fresh)

    assert imported.code == 0
    assert again.out.encode() == exported.read_bytes()


def test_import_publishes_the_files(ops: Ops, tmp_path: Path) -> None:
    _history(ops)
    exported = tmp_path / "export.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    fresh_dir = tmp_path / "fresh"
    fresh = {
        "MEMWORKER_DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}",
        "MEMWORKER_DATA_DIR": str(fresh_dir),
    }

    ops("import", str(exported), **fresh)

    published = fresh_dir / "files" / "user" / ops.user / "_default" / "memories/preferences.md"
    assert "green tea" in published.read_text()


def test_import_into_a_namespace_with_memory_exits_2_and_writes_nothing(
    ops: Ops, tmp_path: Path
) -> None:
    _history(ops)
    exported = tmp_path / "export.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    before = ops.store.export_namespace(f"user:{ops.user}")

    ran = ops("import", str(exported))

    assert ran.code == 2
    assert "already has memory" in ran.err
    assert ops.store.export_namespace(f"user:{ops.user}") == before


def test_an_erased_user_restored_on_purpose_is_imported_above_the_erase_fence(
    ops: Ops, tmp_path: Path
) -> None:
    _history(ops)
    exported = tmp_path / "export.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    ns = f"user:{ops.user}"
    before = ops.store.load_state(ns).version
    ops("forget", "--user", ops.user, "--yes")

    ran = ops("import", str(exported), "--restore-erased")

    assert ran.code == 0, ran.err
    assert "green tea" in ops.store.current_files(ns)["/memories/preferences.md"]
    assert ops.store.load_state(ns).version > before


def test_import_of_an_invalid_document_exits_2_and_writes_nothing(ops: Ops, tmp_path: Path) -> None:
    _history(ops)
    doc = json.loads(ops("export", "--user", ops.user).out)
    doc["namespace"] = f"user:{ops.user}x"
    doc["files"][0]["versions"][1]["version"] = 7
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(doc))

    ran = ops("import", str(broken))

    assert ran.code == 2
    assert "versions are [1, 7, 3]" in ran.err
    assert f"user:{ops.user}x" not in ops.store.namespaces(user_id=ops.user + "x")


def test_export_of_an_unknown_user_exits_3(ops: Ops) -> None:
    ran = ops("export", "--user", ops.user)

    assert ran.code == 3
    assert "has no memory to export" in ran.err


def test_export_shows_when_an_entry_was_said_and_when_it_was_committed(ops: Ops) -> None:
    said = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    ops.enqueue("I moved to Lyon", occurred_at=said)
    ops("reconcile", "--user", ops.user)

    (entry,) = json.loads(ops("export", "--user", ops.user).out)["entries"]

    assert datetime.fromisoformat(entry["valid_from"]) == said
    assert datetime.fromisoformat(entry["created_at"]) > said
