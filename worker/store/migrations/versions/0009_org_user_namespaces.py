"""Namespace key columns hold the key of a user inside an organisation.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

A user namespace may carry its organisation, ``org:<org>:user:<user>[:<assistant>]`` (the same
user id in two organisations is two people), one id longer than the longest key before
(``user:<user>:<assistant>``). The key columns (``namespaces.key``, ``runs.namespace``,
``outbox.namespace``, ``source_cursors.key`` and ``.namespace``) widen from 272 to 400
characters. No row moves: a namespace without an org keeps the key it always had. SQLite does
not enforce lengths; there the batch copy only records the new width, and rebuilds the outbox
with ``AUTOINCREMENT`` as it was (its ids must never be handed out again after an erase).
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


#: Tables SQLite must rebuild with ``AUTOINCREMENT`` (``sqlite_autoincrement`` in the schema).
AUTOINCREMENT = frozenset({"outbox"})


def _resize(old: int, new: int) -> None:
    for table, column, nullable in COLUMNS:
        kwargs = {"sqlite_autoincrement": True} if table in AUTOINCREMENT else {}
        with op.batch_alter_table(table, table_kwargs=kwargs) as batch:
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
