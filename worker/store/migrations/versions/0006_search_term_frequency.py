"""The search index keeps each entry's repeated terms (BM25's term frequency).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

Adds ``search_docs.repeats`` (see ``worker.store.search``) and fills it from the text of
every entry already indexed, in the migration's transaction; the rest of the index (its
postings, statistics and text-search configuration) is left as it is. An index that migration
``0004`` created with the current code has the column already: it is filled again, to the
same values.
"""

from __future__ import annotations

from alembic import op

from worker.store import search as search_ddl

from worker.store import search_text
from worker.store import search as search_index
revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    search_text.add_repeats(conn)
    search_index.backfill_repeats(conn)


def downgrade() -> None:
    search_text.drop_repeats(op.get_bind())
