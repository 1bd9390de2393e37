"""Alembic migrations, driven from code: no ``alembic.ini``, scripts found inside the package.

``script_location`` is given as ``worker.store:migrations`` (a package resource), so upgrades
work from an installed wheel as well as from a checkout.

>>> from worker.store.engine import create_store_engine
>>> engine = create_store_engine("sqlite://")
>>> upgrade(engine); current_revision(engine) == head_revision()
True
>>> engine.dispose()
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import TYPE_CHECKING, Final

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from worker.errors import SchemaOutOfDate, StoreUnavailable

#: Our own version table, so memworker can share a database with an application that uses
#: Alembic itself (whose table is ``alembic_version``).
VERSION_TABLE: Final = "memworker_alembic_version"

SCRIPT_LOCATION: Final = "worker.store:migrations"

#: ``revision = "0002"`` and ``down_revision = "0001"`` lines of a migration script.
_REVISION_LINE: Final = re.compile(
    r'^(down_revision|revision)\s*(?::[^=]*)?=\s*"?([^"\s]*)"?', re.MULTILINE
)

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic is imported only where a migration runs or an unknown revision is explained: every
# process opens the store, and importing Alembic (0.1 s) just to learn the newest revision
# would make each operator command pay for it.


def alembic_config(engine: Engine | None = None) -> Config:
    """An in-memory Alembic config; ``engine`` is handed to ``env.py`` through attributes."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.set_main_option("version_table", VERSION_TABLE)
    if engine is not None:
        config.attributes["engine"] = engine
    return config


@functools.cache
def head_revision() -> str:
    """The newest migration this code ships: the revision no other script names as its
    ``down_revision``, read from the scripts' text (the same answer as Alembic's
    ``get_current_head``, which a test checks, without importing Alembic)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    versions = resources.files("worker.store").joinpath("migrations", "versions")
    for script in versions.iterdir():
        if not script.name.endswith(".py") or script.name.startswith("_"):
            continue
        for name, value in _REVISION_LINE.findall(script.read_text(encoding="utf-8")):
            if value and value != "None":
                (revisions if name == "revision" else parents).add(value)
    heads = revisions - parents
    assert len(heads) == 1, f"the package ships one line of migrations, found heads {heads}"
    return heads.pop()


def current_revision(engine: Engine) -> str | None:
    """The migration the database is at, or None for a database memworker never touched."""
    # Read the version table directly: Alembic's migration context logs two INFO lines each
    # time it is configured, and every worker process opens the store.
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(VERSION_TABLE):
                return None
            table = sa.table(VERSION_TABLE, sa.column("version_num", sa.String))
            heads = list(conn.execute(sa.select(table.c.version_num)).scalars())
    except sa.exc.OperationalError as exc:
        raise StoreUnavailable(f"could not reach the database: {exc.orig}") from None
    return str(heads[0]) if len(heads) == 1 else None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (default: the newest); safe to repeat."""
    if revision == "head" and current_revision(engine) == head_revision():
        return  # nothing to do: skip Alembic, whose context logs on every configure
    from alembic import command

    try:
        command.upgrade(alembic_config(engine), revision)
    except sa.exc.OperationalError as exc:
        raise StoreUnavailable(f"could not migrate the database: {exc.orig}") from None


def check_migrated(engine: Engine) -> None:
    """Raise :class:`SchemaOutOfDate` unless the database is at this code's newest migration."""
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaOutOfDate(
            f"the database {where} has no memworker schema; run `memworker db upgrade` to create it"
        )
    from alembic.script import ScriptDirectory

    known = {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    if current not in known:
        raise SchemaOutOfDate(
            f"the database {where} is at migration {current}, newer than this memworker "
            f"(newest known: {head}); upgrade memworker"
        )
    raise SchemaOutOfDate(
        f"the database {where} is at migration {current}, behind {head}; run `memworker db upgrade`"
    )
