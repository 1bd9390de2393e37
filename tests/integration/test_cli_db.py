"""``memworker db`` and any command given an unsupported database URL: a usage error, exit 2."""

from __future__ import annotations

import pytest

from tests.integration.test_cli_support import Ops, ops

__all__ = ["ops"]

MYSQL = "mysql://memworker@db.example/memworker"


@pytest.mark.parametrize("command", [("db", "upgrade"), ("db", "current")])
def test_db_commands_refuse_a_mysql_url_as_bad_input_exit_2(
    ops: Ops, command: tuple[str, ...]
) -> None:
    ran = ops(*command, "--database-url", MYSQL)

    assert ran.code == 2
    assert ran.err.startswith("error: database URL scheme 'mysql' is not supported")


@pytest.mark.parametrize("command", [("show", "--user", "u1"), ("status",), ("reconcile", "--all")])
def test_commands_refuse_a_mysql_database_url_setting_as_bad_input_exit_2(
    ops: Ops, command: tuple[str, ...]
) -> None:
    ran = ops(*command, MEMWORKER_DATABASE_URL=MYSQL)

    assert ran.code == 2
    assert "MEMWORKER" in ran.err or "postgresql+psycopg" in ran.err
