"""``memworker show``, ``history``, ``diff`` and ``rollback``: reading and repairing a file."""

from __future__ import annotations

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]

PREFS = "/memories/preferences.md"


def _two_versions(ops: Ops) -> None:
    """preferences.md: version 1 says tea, version 2 (a bad merge) says coffee."""
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops("reconcile", "--user", ops.user)
    ops.enqueue("I prefer black coffee", key="preference.drink")
    ops("reconcile", "--user", ops.user)


def test_show_json_lists_the_current_files(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("show", "--user", ops.user, "--json")

    assert ran.code == 0
    assert ran.json()["files"][PREFS].endswith("- I prefer black coffee\n")


def test_show_with_an_org_reads_the_user_of_that_org_not_the_same_id_elsewhere(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", org_id="acme")
    ops.enqueue("I prefer black coffee", org_id="globex")
    ops("reconcile", "--user", ops.user, "--org", "acme")
    ops("reconcile", "--user", ops.user, "--org", "globex")

    acme = ops("show", "--user", ops.user, "--org", "acme", "--json").json()["files"][PREFS]
    globex = ops("show", "--user", ops.user, "--org", "globex", "--json").json()["files"][PREFS]

    assert ("green tea" in acme, "coffee" in acme) == (True, False)
    assert ("coffee" in globex, "tea" in globex) == (True, False)
    assert ops("show", "--user", ops.user).code == 3  # the user of no org has no memory


def test_show_of_an_unknown_user_exits_3(ops: Ops) -> None:
    ran = ops("show", "--user", "nobody-" + ops.user)

    assert ran.code == 3
    assert "is unknown" in ran.err


def test_history_lists_every_version_oldest_first(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("history", "--user", ops.user, "--path", "preferences", "--json")

    assert [(v["version"], v["author"]) for v in ran.json()] == [
        (1, "consolidator"),
        (2, "consolidator"),
    ]


def test_history_of_an_unknown_file_exits_3(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("history", "--user", ops.user, "--path", "nothing-here")

    assert ran.code == 3
    assert "has no file /memories/nothing-here.md" in ran.err


def test_diff_shows_what_changed_between_two_versions(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("diff", "--user", ops.user, "--path", "preferences", "1", "2", "--json")

    assert ran.code == 0
    assert ran.json()["diff"].splitlines()[-2:] == [
        "-- I prefer green tea",
        "+- I prefer black coffee",
    ]


def test_diff_with_an_unknown_version_exits_3_naming_the_versions(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("diff", "--user", ops.user, "--path", "preferences", "1", "9")

    assert ran.code == 3
    assert "has versions 1 to 2" in ran.err


def test_rollback_adds_a_version_equal_to_the_old_one_and_keeps_history(ops: Ops) -> None:
    _two_versions(ops)
    ns = f"user:{ops.user}"
    original = ops.store.file_version(ns, PREFS, 1).content

    ran = ops("rollback", "--user", ops.user, "--path", "preferences", "--to", "1", "--yes")
    history = ops("history", "--user", ops.user, "--path", "preferences", "--json").json()

    assert ran.code == 0
    assert [(v["version"], v["author"]) for v in history] == [
        (1, "consolidator"),
        (2, "consolidator"),
        (3, "rollback"),
    ]
    assert history[2]["content"] == original
    assert ops.sink_file(f"user/{ops.user}/_default", PREFS).read_text() == original


def test_rollback_sticks_when_the_next_batch_is_merged(ops: Ops) -> None:
    _two_versions(ops)
    ops("rollback", "--user", ops.user, "--path", "preferences", "--to", "1", "--yes")
    ops.enqueue("Remember that I am vegetarian")

    ops("reconcile", "--user", ops.user)

    content = ops.store.current_files(f"user:{ops.user}")[PREFS]
    assert "green tea" in content
    assert "black coffee" not in content


def test_rollback_answered_no_changes_nothing(ops: Ops) -> None:
    _two_versions(ops)

    ran = ops("rollback", "--user", ops.user, "--path", "preferences", "--to", "1", input="n\n")

    assert ran.code == 0
    assert "nothing was changed" in ran.err
    assert len(ops.store.file_history(f"user:{ops.user}", PREFS)) == 2
