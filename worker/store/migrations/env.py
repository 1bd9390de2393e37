"""Alembic environment: migrates the engine handed over by :func:`worker.store.schema.upgrade`.

Only online migrations are supported: the store always has an engine to migrate.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Engine

from worker.errors import StoreRefused
from worker.store.schema import metadata
from worker.store.search_text import is_index_object


def _run() -> None:
    config = context.config
    engine = config.attributes.get("engine")
    if not isinstance(engine, Engine):
        raise StoreRefused(
            "memworker migrations run through `memworker db upgrade` "
            "(worker.store.schema.upgrade), not the alembic command line"
        )
    with engine.connect() as conn:
        context.configure(
            connection=conn,
            target_metadata=metadata,
            version_table=config.get_main_option("version_table") or "alembic_version",
            # SQLite cannot ALTER most things: later migrations rebuild tables in batches.
            render_as_batch=conn.dialect.name == "sqlite",
            compare_type=True,
            # The search index's tables are dialect DDL, not in ``metadata``.
            include_name=lambda name, type_, parents: not is_index_object(name, type_, parents),
        )
        with context.begin_transaction():
            context.run_migrations()
        conn.commit()


# Alembic executes this file as a script; imported as a regular module (documentation tools,
# doctest collection) there is no migration context, so do nothing.
if __name__ != "worker.store.migrations.env":
    if context.is_offline_mode():
        raise StoreRefused(
            "offline (SQL script) migrations are not supported; use `memworker db upgrade`"
        )
    _run()
