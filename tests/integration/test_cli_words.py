"""The words the CLI uses: one vocabulary for the two counters, the user's other namespaces
named where they are missed, ``--org`` wherever a command names a namespace, and errors that
speak to an operator (commands and settings, never Python calls).

Counters: a namespace's *revision* counts its commits (any of its files); a file's *version*
counts that file's own changes. ``reconcile`` reports both; ``history`` lists both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command

from tests.integration.test_cli_support import Ops, ops
from worker.cli.app import app
from worker.errors import SchemaOutOfDate
from worker.store.memory import MemoryStore

__all__ = ["ops"]

PREFS = "/memories/preferences.md"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _second_file(ops: Ops) -> str:
    """preferences.md at namespace revision 1, then another file at revision 2; returns the
    second reconcile's output."""
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops("reconcile", "--user", ops.user)
    ops.enqueue("I work at Acme as a nurse", topic="work")
    ran = ops("reconcile", "--user", ops.user)
    assert ran.code == 0, ran.err
    return _one_line(ran.out)


def test_reconcile_names_the_namespace_revision_and_each_files_own_version(ops: Ops) -> None:
    out = _second_file(ops)

    assert f"user:{ops.user}: committed namespace revision 2 (/memories/work.md version 1;" in out


def test_history_lists_the_file_version_beside_the_namespace_revision_that_wrote_it(
    ops: Ops,
) -> None:
    _second_file(ops)

    ran = ops("history", "--user", ops.user, "--path", "work", "--json")

    assert [(v["version"], v["namespace_revision"]) for v in ran.json()] == [(1, 2)]


def test_history_explains_its_two_counters_in_reconciles_words(ops: Ops) -> None:
    _second_file(ops)

    out = _one_line(ops("history", "--user", ops.user, "--path", "work").out)

    assert "namespace revision" in out
    assert "version counts this file's changes; namespace revision counts the namespace's" in out


def test_reconcile_json_carries_the_revision_and_each_files_version(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink")

    (done,) = ops("reconcile", "--user", ops.user, "--json").json()["namespaces"]

    assert done["revision"] == 1
    assert [(f["path"], f["version"]) for f in done["files"]] == [(PREFS, 1)]


def test_show_of_a_user_known_only_with_an_assistant_names_that_namespace(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink", assistant_id="bot")
    ops("reconcile", "--user", ops.user, "--assistant", "bot")

    ran = ops("show", "--user", ops.user)

    assert ran.code == 3
    assert f"also has memory in user:{ops.user}:bot" in _one_line(ran.err)
    assert f"memworker show --namespace user:{ops.user}:bot" in _one_line(ran.err)


def test_show_lists_the_users_other_namespaces_beside_the_files(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops.enqueue("I prefer short answers", key="preference.style", assistant_id="bot")
    ops("reconcile", "--all")

    ran = ops("show", "--user", ops.user)
    as_json = ops("show", "--user", ops.user, "--json").json()

    assert ran.code == 0
    assert "I prefer green tea" in ran.out
    assert f"also has memory in user:{ops.user}:bot" in _one_line(ran.err)
    assert as_json["other_namespaces"] == [f"user:{ops.user}:bot"]


def test_show_of_a_user_with_one_namespace_adds_no_hint(ops: Ops) -> None:
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops("reconcile", "--user", ops.user)

    ran = ops("show", "--user", ops.user)

    assert "also has memory" not in ran.err


def _options(command: Any) -> set[str]:
    return {opt for param in command.params for opt in getattr(param, "opts", [])}


def _commands(command: Any, path: str = "") -> list[tuple[str, Any]]:
    found = [(path, command)] if path else []
    for name, sub in getattr(command, "commands", {}).items():
        found.extend(_commands(sub, f"{path} {name}".strip()))
    return found


NAMING = [
    (path, command)
    for path, command in _commands(get_command(app))
    if {"--user", "--namespace"} <= _options(command)
]


def test_the_commands_that_name_a_namespace_are_the_ones_expected() -> None:
    assert sorted(path for path, _ in NAMING) == [
        "approvals list", "candidate", "diff", "export", "history", "publish", "reconcile",
        "rollback", "scan", "search", "show", "why",
    ]  # fmt: skip


@pytest.mark.parametrize(("path", "command"), NAMING, ids=[p for p, _ in NAMING])
def test_every_command_that_names_a_namespace_takes_org_and_assistant(
    path: str, command: Any
) -> None:
    assert {"--user", "--assistant", "--org", "--namespace"} <= _options(command)


def test_reconcile_of_an_org_reconciles_the_orgs_namespace(ops: Ops, tmp_path: Path) -> None:
    policy = tmp_path / "policy.md"
    policy.write_text("# Policy\n\n- Answer in English\n")
    ops("put", "--org", "acme", "--path", "policies/compliance.md", str(policy))

    ran = ops("reconcile", "--org", "acme", "--json")

    assert ran.code == 0, ran.err
    assert [n["namespace"] for n in ran.json()["namespaces"]] == ["org:acme"]


def test_a_store_without_schema_names_the_command_to_run_not_a_python_call(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"

    with pytest.raises(SchemaOutOfDate) as refused:
        MemoryStore.from_url(url, create=False)

    assert "run `memworker db upgrade` to create it" in str(refused.value)
    assert "create=True" not in str(refused.value)
