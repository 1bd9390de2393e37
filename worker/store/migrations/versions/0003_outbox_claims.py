"""Claimed outbox deliveries and per-sink health.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A deliverer claims outbox rows for a short lease before it calls a sink, so each row is
attempted by one deliverer at a time. ``sink_health`` holds each sink's circuit breaker: how
many deliveries failed in a row, and until when the sink is left alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TIMESTAMP = sa.DateTime(timezone=True)

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("claim_expires_at", TIMESTAMP, nullable=True))
    op.create_table(
        "sink_health",
        sa.Column("sink", sa.String(length=200), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("open_until", TIMESTAMP, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_failure_at", TIMESTAMP, nullable=True),
        sa.Column("last_success_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("sink", name=op.f("pk_sink_health")),
    )


def downgrade() -> None:
    op.drop_table("sink_health")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("claim_expires_at")
        batch.drop_column("claimed_by")
