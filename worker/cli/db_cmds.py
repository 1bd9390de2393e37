"""``memworker db``: migrate the memory store and show its schema revision.

>>> import typer
>>> app = typer.Typer()
>>> register(app)
>>> [g.name for g in app.registered_groups]
['db']
"""

from __future__ import annotations

from typing import Annotated

import typer

from worker.cli.errors import cli_errors

DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL of the store. Default: MEMWORKER_DATABASE_URL, else the embedded "
        "SQLite file in the data directory.",
        show_default=False,
    ),
]


def _url(database_url: str | None) -> str:
    from worker.settings import load_settings

    return database_url or load_settings().effective_database_url


def register_db(app: typer.Typer) -> None:
    """Add the ``db`` command group (``upgrade``, ``current``) to ``app``."""
    db = typer.Typer(help="The SQL memory store: schema migrations.", no_args_is_help=True)

    @db.command("upgrade")
    def upgrade(database_url: DatabaseUrl = None) -> None:
        """Migrate the store to the newest schema (creates it on an empty database)."""
        from worker.store import migrate
        from worker.store.engine import create_store_engine

        with cli_errors():  # a bad URL exits 2, an unreachable server 4
            engine = create_store_engine(_url(database_url), create_dirs=True)
            try:
                before = migrate.current_revision(engine)
                migrate.upgrade(engine)
                after = migrate.current_revision(engine)
            finally:
                engine.dispose()
        if before == after:
            typer.echo(f"already at {after} (newest)")
        else:
            typer.echo(f"upgraded {before or 'empty database'} -> {after}")

    @db.command("current")
    def current(database_url: DatabaseUrl = None) -> None:
        """Show the store's schema revision and whether it is the newest."""
        from worker.store import migrate
        from worker.store.engine import create_store_engine

        with cli_errors():
            engine = create_store_engine(_url(database_url))
            try:
                revision = migrate.current_revision(engine)
            finally:
                engine.dispose()
            head = migrate.head_revision()
        if revision is None:
            typer.echo(f"not migrated (newest is {head}); run `memworker db upgrade`")
            raise typer.Exit(code=1)
        state = "newest" if revision == head else f"behind {head}; run `memworker db upgrade`"
        typer.echo(f"{revision} ({state})")

    app.add_typer(db, name="db")
