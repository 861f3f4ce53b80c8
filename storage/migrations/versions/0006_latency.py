"""draft_latency: standalone next-token latency per strategy and engine (`greenspec latency SPEC`)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "draft_latency",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment", sa.String(length=200), nullable=False),
        sa.Column("strategy", sa.String(length=100), nullable=False),
        sa.Column("draft", sa.String(length=32), nullable=False),
        sa.Column("engine", sa.String(length=32), nullable=False),
        sa.Column("queries", sa.Integer(), nullable=False),
        sa.Column("prompts", sa.Integer(), nullable=False),
        sa.Column("repeats", sa.Integer(), nullable=False),
        sa.Column("mean_us", sa.Float(), nullable=False),
        sa.Column("median_us", sa.Float(), nullable=False),
        sa.Column("p95_us", sa.Float(), nullable=False),
        sa.Column("min_us", sa.Float(), nullable=False),
        sa.Column("host", sa.String(length=200), nullable=True),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_draft_latency_experiment", "draft_latency", ["experiment"])


def downgrade() -> None:
    op.drop_index("ix_draft_latency_experiment", table_name="draft_latency")
    op.drop_table("draft_latency")
