"""artifacts: built artifacts other than instance bases (datastores, verifier labels)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 14:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("cell_id", sa.Integer(), sa.ForeignKey("cells.id"), nullable=False, unique=True),
        sa.Column("experiment_id", sa.Integer(), sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("corpus", sa.String(100), nullable=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("build_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("power_source", sa.String(100), nullable=True),
        sa.Column("power_measured", sa.Boolean(), nullable=True),
        sa.Column("meta", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_artifacts_experiment_id", "artifacts", ["experiment_id"])


def downgrade() -> None:
    op.drop_index("ix_artifacts_experiment_id", "artifacts")
    op.drop_table("artifacts")
