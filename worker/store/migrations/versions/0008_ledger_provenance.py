"""The candidate ledger says where each candidate came from and what the plan did with it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04

Adds, all nullable (rows written before this revision have none):
``source`` and ``thread_id`` (where the candidate was said), ``said_at`` (when: the
candidate's own time, not the merge's), ``operation`` (the plan operation that consumed it:
add, supersede, confirm, invalidate, reject) and ``revision`` (the namespace revision its
batch committed). An index on ``candidate_id`` lets ``memworker candidate ID`` find a
candidate without knowing its namespace. Existing rows are not rewritten.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

TIMESTAMP = sa.DateTime(timezone=True)

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

#: (name, type) of each column added; types as in ``worker.store.schema``.
COLUMNS = (
    ("source", sa.String(length=32)),
    ("thread_id", sa.String(length=128)),
    ("said_at", TIMESTAMP),
    ("operation", sa.String(length=32)),
    ("revision", sa.Integer()),
)


def upgrade() -> None:
    for name, type_ in COLUMNS:
        op.add_column("candidate_ledger", sa.Column(name, type_, nullable=True))
    op.create_index(op.f("ix_candidate_ledger_candidate_id"), "candidate_ledger", ["candidate_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_candidate_ledger_candidate_id"), table_name="candidate_ledger")
    with op.batch_alter_table("candidate_ledger") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
