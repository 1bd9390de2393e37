"""The search index of active entries, and a table for their vectors.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Creates the full-text index (FTS5 on SQLite, a GIN-indexed ``tsvector`` on PostgreSQL; see
``worker.store.search``) and fills it from the active entries already stored, in the
migration's transaction; and ``entry_vectors``, where the worker keeps optional embeddings.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from worker.store import search as search_ddl

from worker.store import search_text
from worker.store import search as search_index
TIMESTAMP = sa.DateTime(timezone=True)

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entry_vectors",
        sa.Column("namespace_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("entry_id", sa.String(length=128), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("text_digest", sa.String(length=64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("embedded_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id", "entry_id"],
            ["entries.namespace_id", "entries.id"],
            name=op.f("fk_entry_vectors_namespace_id_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("namespace_id", "entry_id", name=op.f("pk_entry_vectors")),
    )
    op.create_index(
        op.f("ix_entry_vectors_namespace_id_model_embedded_at"),
        "entry_vectors",
        ["namespace_id", "model", "embedded_at"],
    )
    conn = op.get_bind()
    search_text.create(conn)
    search_index.rebuild(conn)


def downgrade() -> None:
    search_text.drop(op.get_bind())
    op.drop_table("entry_vectors")
