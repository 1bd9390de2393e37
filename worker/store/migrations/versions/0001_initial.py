"""The initial schema of the memory store.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

A frozen snapshot: later schema changes get their own revision, never an edit here. Column
types are the storage types of :mod:`worker.store.schema` (``UTCDateTime`` is stored as
``TIMESTAMP WITH TIME ZONE``), spelled out so this file never changes with the code.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

TIMESTAMP = sa.DateTime(timezone=True)
JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "namespaces",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=272), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("user_id", sa.String(length=128), nullable=True),
        sa.Column("assistant_id", sa.String(length=128), nullable=True),
        sa.Column("org_id", sa.String(length=128), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("applied_position", sa.String(length=64), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_namespaces")),
        sa.UniqueConstraint("key", name=op.f("uq_namespaces_key")),
    )
    op.create_index(op.f("ix_namespaces_user_id"), "namespaces", ["user_id"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=272), nullable=True),
        sa.Column("schedule", sa.String(length=200), nullable=True),
        sa.Column("tick", TIMESTAMP, nullable=True),
        sa.Column("window_start", TIMESTAMP, nullable=True),
        sa.Column("window_end", TIMESTAMP, nullable=True),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("candidates", sa.Integer(), server_default="0", nullable=False),
        sa.Column("counts", JSON, nullable=False),
        sa.Column("llm_calls", sa.Integer(), server_default="0", nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.Column("completion_tokens", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_namespace"), "runs", ["namespace"], unique=False)

    op.create_table(
        "schedule_ticks",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("schedule", sa.String(length=200), nullable=False),
        sa.Column("tick", TIMESTAMP, nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="1", nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("window_start", TIMESTAMP, nullable=True),
        sa.Column("window_end", TIMESTAMP, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_ticks")),
        sa.UniqueConstraint("schedule", "tick", name=op.f("uq_schedule_ticks_schedule_tick")),
    )
    op.create_table(
        "schedule_watermarks",
        sa.Column("schedule", sa.String(length=200), nullable=False),
        sa.Column("watermark", TIMESTAMP, nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("schedule", name=op.f("pk_schedule_watermarks")),
    )
    op.create_table(
        "source_cursors",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=272), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("namespace", sa.String(length=272), nullable=True),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_source_cursors")),
        sa.UniqueConstraint("source", "key", name=op.f("uq_source_cursors_source_key")),
    )
    op.create_index(
        op.f("ix_source_cursors_namespace"), "source_cursors", ["namespace"], unique=False
    )

    op.create_table(
        "approvals",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("namespace_id", ID, nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("operation", JSON, nullable=False),
        sa.Column("candidate_ids", JSON, nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("decided_at", TIMESTAMP, nullable=True),
        sa.Column("decided_by", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_approvals_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_approvals_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
    )
    op.create_index(op.f("ix_approvals_status"), "approvals", ["status"], unique=False)

    op.create_table(
        "candidate_ledger",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("namespace_id", ID, nullable=False),
        sa.Column("candidate_id", sa.String(length=128), nullable=False),
        sa.Column("trace_id", sa.String(length=128), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("entry_id", sa.String(length=128), nullable=True),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_candidate_ledger_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_candidate_ledger_run_id_runs")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_candidate_ledger")),
        sa.UniqueConstraint(
            "namespace_id",
            "candidate_id",
            name=op.f("uq_candidate_ledger_namespace_id_candidate_id"),
        ),
    )
    op.create_table(
        "entries",
        sa.Column("namespace_id", ID, nullable=False),
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=True),
        sa.Column("valid_from", TIMESTAMP, nullable=False),
        sa.Column("invalid_at", TIMESTAMP, nullable=True),
        sa.Column("invalid_reason", sa.Text(), nullable=True),
        sa.Column("superseded_by", sa.String(length=128), nullable=True),
        sa.Column("confirmations", sa.Integer(), nullable=False),
        sa.Column("candidate_ids", JSON, nullable=False),
        sa.Column("trace_ids", JSON, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("last_confirmed_at", TIMESTAMP, nullable=False),
        sa.Column("added_version", sa.Integer(), nullable=False),
        sa.Column("invalidated_version", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_entries_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("namespace_id", "id", name=op.f("pk_entries")),
    )
    op.create_index(
        op.f("ix_entries_namespace_id_invalid_at"),
        "entries",
        ["namespace_id", "invalid_at"],
        unique=False,
    )

    op.create_table(
        "memory_files",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("namespace_id", ID, nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("current_version", sa.Integer(), nullable=False),
        sa.Column("operator_owned", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("modified_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["namespace_id"],
            ["namespaces.id"],
            name=op.f("fk_memory_files_namespace_id_namespaces"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_files")),
        sa.UniqueConstraint("namespace_id", "path", name=op.f("uq_memory_files_namespace_id_path")),
    )
    op.create_table(
        "file_versions",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("file_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("namespace_version", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("diff", sa.Text(), nullable=False),
        sa.Column("run_id", ID, nullable=True),
        sa.Column("author", sa.String(length=200), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["file_id"],
            ["memory_files.id"],
            name=op.f("fk_file_versions_file_id_memory_files"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_file_versions_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_file_versions")),
        sa.UniqueConstraint("file_id", "version", name=op.f("uq_file_versions_file_id_version")),
    )
    op.create_table(
        "outbox",
        sa.Column("id", ID, autoincrement=True, nullable=False),
        sa.Column("file_version_id", ID, nullable=True),
        sa.Column("sink", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=272), nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", TIMESTAMP, nullable=False),
        sa.Column("delivered_at", TIMESTAMP, nullable=True),
        sa.Column("superseded_by", ID, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["file_version_id"],
            ["file_versions.id"],
            name=op.f("fk_outbox_file_version_id_file_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
        sa.UniqueConstraint("file_version_id", "sink", name=op.f("uq_outbox_file_version_id_sink")),
    )
    op.create_index(
        op.f("ix_outbox_sink_delivered_at_next_attempt_at"),
        "outbox",
        ["sink", "delivered_at", "next_attempt_at"],
        unique=False,
    )
    op.create_index(
        op.f("ix_outbox_sink_namespace_path_id"),
        "outbox",
        ["sink", "namespace", "path", "id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_outbox_sink_namespace_path_id"), table_name="outbox")
    op.drop_index(op.f("ix_outbox_sink_delivered_at_next_attempt_at"), table_name="outbox")

    op.drop_table("outbox")
    op.drop_table("file_versions")
    op.drop_table("memory_files")
    op.drop_index(op.f("ix_entries_namespace_id_invalid_at"), table_name="entries")

    op.drop_table("entries")
    op.drop_table("candidate_ledger")
    op.drop_index(op.f("ix_approvals_status"), table_name="approvals")

    op.drop_table("approvals")
    op.drop_index(op.f("ix_source_cursors_namespace"), table_name="source_cursors")

    op.drop_table("source_cursors")
    op.drop_table("schedule_watermarks")
    op.drop_table("schedule_ticks")
    op.drop_index(op.f("ix_runs_namespace"), table_name="runs")

    op.drop_table("runs")
    op.drop_index(op.f("ix_namespaces_user_id"), table_name="namespaces")

    op.drop_table("namespaces")
