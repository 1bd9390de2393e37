"""The PostgreSQL search index takes a commit's entries through a small pending list.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Sets ``fastupdate = on`` with a 64 kB ``gin_pending_list_limit`` on the GIN index of
``search_docs`` (see ``worker.store.search``): commits append their entries to the list
and the one that fills it merges them into the index in one pass, instead of each entry being
indexed on its own. Only the index's storage options change; no row is rewritten. SQLite's
FTS5 index is left as it is.
"""

from __future__ import annotations

from alembic import op

from worker.store import search as search_ddl

from worker.store import search_text
revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    search_text.bound_pending_list(op.get_bind())


def downgrade() -> None:
    search_text.no_pending_list(op.get_bind())
