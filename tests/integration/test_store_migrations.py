"""Alembic migrations build the schema from empty; an unmigrated database is refused."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
import typer
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from typer.testing import CliRunner

from worker.cli.run import register_db
from worker.errors import StoreError
from worker.models import Namespace
from worker.store import MemoryStore, search_text
from worker.store import schema as migrate
from worker.store.engine import create_store_engine
from worker.store.schema import NAMESPACE_KEY_LENGTH, metadata


@pytest.fixture
def empty_url(database_url: str) -> Iterator[str]:
    """A database with no tables: a new SQLite file, or a new PostgreSQL schema."""
    if database_url.startswith("sqlite"):
        yield database_url
        return
    schema = "mwempty_" + uuid.uuid4().hex[:10]
    admin = sa.create_engine(database_url)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = sa.engine.make_url(database_url).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    admin.dispose()


def _tables(url: str) -> set[str]:
    engine = create_store_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_creates_every_table_from_empty(empty_url: str) -> None:
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()

    tables = _tables(empty_url)
    assert tables - search_text.TABLES == {t.name for t in metadata.sorted_tables} | {
        migrate.VERSION_TABLE
    }
    assert search_text.DOCS in tables


def _compare_type(
    context: MigrationContext, _inspected: object, _column: object, found: object, wanted: object
) -> bool | None:
    """Types differ as alembic says, but for a string's length on SQLite, which neither stores
    nor enforces one: migration 0009 widens the namespace keys on PostgreSQL only."""
    both_strings = all(
        isinstance(t, sa.String) and not isinstance(t, sa.Text) for t in (found, wanted)
    )
    if context.dialect.name == "sqlite" and both_strings:
        return False
    return None


def test_migrated_schema_matches_the_code(empty_url: str) -> None:
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "version_table": migrate.VERSION_TABLE,
                    "compare_type": _compare_type,
                    # The search index's dialect tables are compared in test_store_search_index.
                    "include_name": lambda n, t, p: not search_text.is_index_object(n, t, p),
                },
            )
            diffs = compare_metadata(context, metadata)
    finally:
        engine.dispose()

    assert diffs == []


def test_from_url_refuses_a_database_that_is_not_migrated(empty_url: str) -> None:
    with pytest.raises(StoreError, match="run `memworker db upgrade`"):
        MemoryStore.from_url(empty_url)


def test_from_url_with_create_migrates_and_opens(empty_url: str) -> None:
    store = MemoryStore.from_url(empty_url, create=True)
    try:
        assert store.load_state("user:u1").version == 0
    finally:
        store.dispose()
    assert migrate.VERSION_TABLE in _tables(empty_url)


def test_upgrade_is_idempotent(empty_url: str) -> None:
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine)
        migrate.upgrade(engine)
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


def test_database_from_a_newer_release_is_refused(empty_url: str) -> None:
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine)
        with engine.begin() as conn:
            conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'"))
        with pytest.raises(StoreError, match="newer than this memworker"):
            migrate.check_migrated(engine)
    finally:
        engine.dispose()


def test_unsupported_url_scheme_is_refused() -> None:
    with pytest.raises(StoreError, match="not supported"):
        create_store_engine("mysql://localhost/db")


def _cli() -> typer.Typer:

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """memworker (test harness)."""

    register_db(app)
    return app


def test_db_upgrade_command_migrates_then_current_reports_newest(empty_url: str) -> None:
    app = _cli()
    runner = CliRunner()

    before = runner.invoke(app, ["db", "current", "--database-url", empty_url])
    upgraded = runner.invoke(app, ["db", "upgrade", "--database-url", empty_url])
    after = runner.invoke(app, ["db", "current", "--database-url", empty_url])

    assert (before.exit_code, "not migrated" in before.output) == (1, True)
    assert upgraded.exit_code == 0, upgraded.output
    assert f"-> {migrate.head_revision()}" in upgraded.output
    assert after.exit_code == 0
    assert after.output.strip() == f"{migrate.head_revision()} (newest)"


def test_the_longest_namespace_key_a_user_of_an_org_can_have_fits_the_key_columns() -> None:
    longest = Namespace.for_user("u" * 128, assistant_id="a" * 128, org_id="o" * 128).key

    assert len(longest) <= NAMESPACE_KEY_LENGTH
    assert {c.type.length for c in _namespace_key_columns()} == {NAMESPACE_KEY_LENGTH}


def _namespace_key_columns() -> list[sa.Column[str]]:
    """Every column holding a namespace key (the ones migration 0009 widened)."""
    tables = {t.name: t for t in metadata.sorted_tables}
    return [
        tables["namespaces"].c.key,
        tables["runs"].c.namespace,
        tables["outbox"].c.namespace,
        tables["source_cursors"].c.key,
        tables["source_cursors"].c.namespace,
    ]
