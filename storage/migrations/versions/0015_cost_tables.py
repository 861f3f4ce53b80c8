"""cost_tables: round-cost tables as portable artifacts (`greenspec costs measure / import / export / list`), keyed by
verifier, device description, dtype and threads, with the machine's description, their noise and their reference
check; repredictions: which experiment was derived from which, re-predicted with which table.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cost_tables",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("verifier", sa.String(length=300), nullable=False),
        sa.Column("device", sa.String(length=300), nullable=False),
        sa.Column("dtype", sa.String(length=32), nullable=True),
        sa.Column("threads", sa.Integer(), nullable=True),
        sa.Column("costs", sa.JSON(), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("agreement", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_index("ix_cost_tables_key", "cost_tables", ["verifier", "device", "dtype", "threads"])
    op.create_table(
        "repredictions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("source_id", sa.Integer(), nullable=False),
        sa.Column("cost_table_id", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=300), nullable=False),
        sa.Column("generations", sa.Integer(), nullable=False),
        sa.Column("source_last_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"]),
        sa.ForeignKeyConstraint(["source_id"], ["experiments.id"]),
        sa.ForeignKeyConstraint(["cost_table_id"], ["cost_tables.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("experiment_id"),
    )
    op.create_index("ix_repredictions_source_id", "repredictions", ["source_id"])
    op.create_index("ix_repredictions_cost_table_id", "repredictions", ["cost_table_id"])


def downgrade() -> None:
    op.drop_index("ix_repredictions_cost_table_id", table_name="repredictions")
    op.drop_index("ix_repredictions_source_id", table_name="repredictions")
    op.drop_table("repredictions")
    op.drop_index("ix_cost_tables_key", table_name="cost_tables")
    op.drop_table("cost_tables")
