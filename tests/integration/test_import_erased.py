"""Erase is final for import too: an export taken before ``forget`` does not bring the user back.

The attack: an operator exports a user (files, history, entries, ledger and a pending approval
of a health fact), the user asks to be forgotten, and later the old export is imported. Without
a check, the user is back, the approval's text included, and nothing says so. Each test runs
on SQLite and PostgreSQL (the ``ops`` fixture's ``database_url``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from tests.integration.test_cli_support import Ops, make_ops
from worker.errors import ErasedNamespace

HEALTH = "/memories/health.md"


@pytest.fixture
def ops(
    database_url: str, redis_url: str, key_prefix: str, tmp_path: Path, redis_client: redis.Redis
) -> Iterator[Ops]:
    """A deployment where changes to health.md wait for approval."""
    yield from make_ops(
        database_url=database_url, redis_url=redis_url, key_prefix=key_prefix,
        data_dir=tmp_path / "data", client=redis_client,
        MEMWORKER_SENSITIVE_PATHS=f'["{HEALTH}"]',
    )  # fmt: skip


def exported_then_forgotten(ops: Ops, tmp_path: Path) -> Path:
    """The user's export, taken while an approval waits; then the user is forgotten."""
    ops.enqueue("I prefer green tea", key="preference.drink")
    ops.enqueue("I am allergic to peanuts", topic="health")
    ops("reconcile", "--user", ops.user)
    assert len(ops.store.pending_approvals(namespace=f"user:{ops.user}")) == 1
    exported = tmp_path / "before-forget.json"
    ops("export", "--user", ops.user, "--out", str(exported))
    assert ops("forget", "--user", ops.user, "--yes").code == 0
    return exported


def nothing_of(ops: Ops, user: str) -> bool:
    """Nothing of ``user`` in SQL (memory, approvals) or in the files sink."""
    return (
        ops.store.namespaces(user_id=user) == []
        and ops.store.pending_approvals(namespace=f"user:{user}") == []
        and not (ops.files_dir / "user" / user).exists()
    )


def test_importing_an_export_taken_before_forget_is_refused_naming_the_user_and_the_flag(
    ops: Ops, tmp_path: Path
) -> None:
    exported = exported_then_forgotten(ops, tmp_path)

    ran = ops("import", str(exported))

    assert ran.code == 2
    assert f"user:{ops.user} was erased (1 time)" in ran.err
    assert "--restore-erased" in ran.err
    assert nothing_of(ops, ops.user)


def test_the_erased_users_export_is_refused_under_another_namespace_too(
    ops: Ops, tmp_path: Path
) -> None:
    exported = exported_then_forgotten(ops, tmp_path)

    ran = ops("import", str(exported), "--namespace", f"user:{ops.user}-copy")

    assert ran.code == 2
    assert f"user:{ops.user} was erased" in ran.err
    assert nothing_of(ops, f"{ops.user}-copy")


def test_another_users_export_is_refused_into_an_erased_namespace(ops: Ops, tmp_path: Path) -> None:
    erased = ops.user
    exported_then_forgotten(ops, tmp_path)
    other = f"{erased}-other"
    ops.enqueue("I play the cello", user=other)
    ops("reconcile", "--user", other)
    document = tmp_path / "other.json"
    ops("export", "--user", other, "--out", str(document))

    ran = ops("import", str(document), "--namespace", f"user:{erased}")

    assert ran.code == 2
    assert f"user:{erased} was erased" in ran.err
    assert nothing_of(ops, erased)


def test_restore_erased_brings_the_user_back_and_says_what_it_restored(
    ops: Ops, tmp_path: Path
) -> None:
    exported = exported_then_forgotten(ops, tmp_path)

    ran = ops("import", str(exported), "--restore-erased")

    assert ran.code == 0, ran.err
    said = " ".join(ran.out.split())
    assert f"restoring erased data (--restore-erased): user:{ops.user} was erased (1 time)" in said
    assert "1 pending approval(s)" in said
    (approval,) = ops.store.pending_approvals(namespace=f"user:{ops.user}")
    assert "peanuts" in json.dumps(approval.operation)


def test_the_json_answer_names_the_erased_namespace_it_restored(ops: Ops, tmp_path: Path) -> None:
    exported = exported_then_forgotten(ops, tmp_path)

    ran = ops("import", str(exported), "--restore-erased", "--json")

    answer = json.loads(ran.out)
    assert answer["restored_erased"] == {f"user:{ops.user}": 1}
    assert answer["pending_approvals"] == 1


def test_the_store_refuses_an_erased_namespace_to_any_caller(ops: Ops, tmp_path: Path) -> None:
    """The rule lives in the store's import transaction, not only in the CLI."""
    document = json.loads(exported_then_forgotten(ops, tmp_path).read_text())
    now = datetime.now(UTC)

    with pytest.raises(ErasedNamespace, match=f"user:{ops.user} was erased"):
        ops.store.import_namespace(document, now=now)
    assert nothing_of(ops, ops.user)

    ops.store.import_namespace(document, now=now, restore_erased=True)
    assert ops.store.namespaces(user_id=ops.user) == [f"user:{ops.user}"]
