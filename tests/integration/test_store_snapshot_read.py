"""A read transaction that sees one snapshot: on PostgreSQL its BEGIN carries REPEATABLE READ
READ ONLY, and the pooled connection goes back to the default (read committed, writable)
afterwards, whether the read succeeded or failed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from worker.store.engine import create_store_engine, read_transaction, write_transaction

pytestmark = pytest.mark.postgres


@pytest.fixture
def engine(pg_database_url: str) -> Iterator[Engine]:
    # Used one transaction at a time: every transaction below gets the same pooled connection.
    e = create_store_engine(pg_database_url)
    yield e
    e.dispose()


def _mode(conn: Connection) -> tuple[str, str]:
    return (
        str(conn.exec_driver_sql("SHOW transaction_isolation").scalar_one()),
        str(conn.exec_driver_sql("SHOW transaction_read_only").scalar_one()),
    )


def test_a_snapshot_read_is_repeatable_read_and_read_only(engine: Engine) -> None:
    with read_transaction(engine, snapshot=True) as conn:
        assert _mode(conn) == ("repeatable read", "on")


def test_a_connection_back_from_a_snapshot_read_writes_at_read_committed(engine: Engine) -> None:
    with read_transaction(engine, snapshot=True) as conn:
        backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()

    with write_transaction(engine) as conn:
        again = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        assert (again, _mode(conn)) == (backend, ("read committed", "off"))


def test_a_failed_snapshot_read_leaves_no_read_only_connection_behind(engine: Engine) -> None:
    with pytest.raises(sa.exc.ProgrammingError), read_transaction(engine, snapshot=True) as conn:
        conn.exec_driver_sql("SELECT * FROM no_such_table")

    with write_transaction(engine) as conn:
        assert _mode(conn) == ("read committed", "off")
