"""Migration 0004 indexes the active entries a store already holds (created at 0003)."""

from __future__ import annotations

import sqlalchemy as sa

from tests.integration.test_store_migrations import empty_url  # noqa: F401  (the fixture)
from tests.store_support import T0, unique_ns
from worker.store import MemoryStore, search_text
from worker.store import schema as migrate
from worker.store.engine import create_store_engine
from worker.store.schema import entries, namespaces


def _old_namespace(conn: sa.Connection, key: str, texts: dict[str, bool]) -> None:
    """A namespace written by a 0003 release: ``texts`` maps entry text to whether active."""
    ns_id = conn.execute(
        sa.insert(namespaces)
        .values(
            key=key,
            scope="user",
            user_id=key.split(":")[1],
            version=1,
            created_at=T0,
            updated_at=T0,
        )
        .returning(namespaces.c.id)
    ).scalar_one()
    conn.execute(
        sa.insert(entries),
        [
            {
                "namespace_id": ns_id,
                "id": f"e{i}",
                "path": "/memories/facts.md",
                "text": text,
                "valid_from": T0,
                "invalid_at": None if active else T0,
                "confirmations": 1,
                "candidate_ids": [f"c{i}"],
                "trace_ids": ["t"],
                "created_at": T0,
                "last_confirmed_at": T0,
                "added_version": 1,
            }
            for i, (text, active) in enumerate(texts.items())
        ],
    )


def test_upgrading_a_0003_store_indexes_its_active_entries(empty_url: str) -> None:  # noqa: F811
    ann, bob = unique_ns(), unique_ns()
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine, "0003")
        with engine.begin() as conn:
            _old_namespace(
                conn, ann, {"Likes green tea": True, "Likes black tea": False, "我住在北京": True}
            )
            _old_namespace(conn, bob, {"Likes oolong tea": True})

        migrate.upgrade(engine)
        store = MemoryStore(engine)

        assert [e.text for e in store.search_entries(ann, "tea", limit=5)] == ["Likes green tea"]
        assert [e.text for e in store.search_entries(ann, "北京", limit=5)] == ["我住在北京"]
        assert [e.text for e in store.search_entries(bob, "tea", limit=5)] == ["Likes oolong tea"]
        with engine.connect() as conn:
            assert conn.exec_driver_sql(f"SELECT count(*) FROM {search_text.DOCS}").scalar() == 3
    finally:
        engine.dispose()


def test_downgrading_0004_drops_the_index(empty_url: str) -> None:  # noqa: F811
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine)
        from alembic import command

        command.downgrade(migrate.alembic_config(engine), "0003")
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
        assert migrate.current_revision(engine) == "0003"
        assert not tables & (search_text.TABLES | {"entry_vectors"})
    finally:
        engine.dispose()


def test_upgrading_a_0005_index_fills_the_repeated_terms_of_its_entries(
    empty_url: str,  # noqa: F811
) -> None:
    ns = unique_ns()
    twice, once = (
        "Bakes raspberry tarts with fresh raspberries",
        "Bakes lemon tarts with fresh raspberries",
    )
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine, "0003")
        with engine.begin() as conn:
            _old_namespace(conn, ns, {twice: True, once: True})
        migrate.upgrade(engine, "0005")
        with engine.begin() as conn:
            search_text.drop_repeats(conn)  # the index as a release before 0006 left it

        migrate.upgrade(engine)
        store = MemoryStore(engine)

        assert [e.text for e in store.search_entries(ns, "raspberries", limit=5)] == [twice, once]
        with engine.connect() as conn:
            held = conn.exec_driver_sql(f"SELECT repeats FROM {search_text.DOCS}").scalars()
            assert sorted(held) == ["", "raspberry:2"]
    finally:
        engine.dispose()


def test_downgrading_0006_drops_the_repeated_terms_and_keeps_the_index(
    empty_url: str,  # noqa: F811
) -> None:
    engine = create_store_engine(empty_url)
    try:
        migrate.upgrade(engine)
        from alembic import command

        command.downgrade(migrate.alembic_config(engine), "0005")
        with engine.connect() as conn:
            columns = {c["name"] for c in sa.inspect(conn).get_columns(search_text.DOCS)}
        assert migrate.current_revision(engine) == "0005"
        assert search_text.REPEATS not in columns
        assert "doc_len" in columns
    finally:
        engine.dispose()
