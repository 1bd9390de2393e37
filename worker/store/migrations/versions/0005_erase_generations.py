"""Erase generations, deliveries in doubt, ids never reused, per-namespace breaker counts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

``erase_generations`` counts the erases of each namespace (under the fence's digest of its
key) and is never deleted, so a delivery made before an erase is recognised after it even
once the user has returned. ``outbox.in_doubt_until`` records until when a failed or abandoned
sink call may still land. On SQLite the outbox and approvals tables are rebuilt with
``AUTOINCREMENT``: without it the largest rowid is handed out again after a delete, and a stale
deliverer's (or operator's) id would name a newer row. PostgreSQL's identities never reuse ids.
``sink_health.failing_digest`` names (by digest) the namespace that failed last, so failures
of one namespace in a row count once toward the breaker.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TIMESTAMP = sa.DateTime(timezone=True)

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: Tables whose ids are compared after rows were deleted; neither is referenced by a foreign
#: key, so rebuilding them cascades nothing.
NEVER_REUSED = ("outbox", "approvals")


def upgrade() -> None:
    op.create_table(
        "erase_generations",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("digest", name=op.f("pk_erase_generations")),
    )
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("in_doubt_until", TIMESTAMP, nullable=True))
    with op.batch_alter_table("sink_health") as batch:
        batch.add_column(sa.Column("failing_digest", sa.String(length=64), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        for table in NEVER_REUSED:
            with op.batch_alter_table(
                table, recreate="always", table_kwargs={"sqlite_autoincrement": True}
            ):
                pass


def downgrade() -> None:
    with op.batch_alter_table("sink_health") as batch:
        batch.drop_column("failing_digest")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("in_doubt_until")
    op.drop_table("erase_generations")
