"""Namespace key columns hold the key of a user inside an organisation.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

A user namespace may carry its organisation, ``org:<org>:user:<user>[:<assistant>]`` (the same
user id in two organisations is two people), one id longer than the longest key before
(``user:<user>:<assistant>``). The key columns (``namespaces.key``, ``runs.namespace``,
``outbox.namespace``, ``source_cursors.key`` and ``.namespace``) widen from 272 to 400
characters. No row moves: a namespace without an org keeps the key it always had. SQLite
neither stores nor enforces a length, so nothing is done there: a batch copy would drop and
re-create ``namespaces``, and with foreign keys on (the store turns them on) dropping it deletes
every file, version and entry through their ``ON DELETE CASCADE``; it would also rebuild the
outbox without ``AUTOINCREMENT``, handing an erased row's id out again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: The key width before and after (see ``worker.store.schema.NAMESPACE_KEY_LENGTH``).
OLD_LENGTH = 272
NEW_LENGTH = 400
#: Every namespace key column: (table, column, nullable).
COLUMNS = (
    ("namespaces", "key", False),
    ("runs", "namespace", True),
    ("outbox", "namespace", False),
    ("source_cursors", "key", False),
    ("source_cursors", "namespace", True),
)


def _resize(old: int, new: int) -> None:
    if op.get_bind().dialect.name == "sqlite":
        return  # see the module notes: no length to change, and a copy would lose data
    for table, column, nullable in COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(
                column,
                existing_type=sa.String(length=old),
                type_=sa.String(length=new),
                existing_nullable=nullable,
            )


def upgrade() -> None:
    _resize(OLD_LENGTH, NEW_LENGTH)


def downgrade() -> None:
    """Narrow again; fails while a key longer than the old width is stored (erase or move
    those namespaces first)."""
    _resize(NEW_LENGTH, OLD_LENGTH)
