"""The fence of erased namespaces.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

Erasing a namespace deletes its row; its version (plus one) stays here under a digest of the
key, so a commit that read the namespace before the erase is refused as stale.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TIMESTAMP = sa.DateTime(timezone=True)

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "namespace_fences",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("erased_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_namespace_fences")),
    )


def downgrade() -> None:
    op.drop_table("namespace_fences")
