"""replay: generations computed without the verifier (`measure`), every verifier pass's shape, predicted wall time;
references carry the verifier's vocabulary size and EOS id (a replay needs them); the pass-cost model per experiment

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 22:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("measure", sa.String(16), nullable=False, server_default="timed"))
        batch.add_column(sa.Column("passes", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("drafted_per_step", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("predicted_wall_s", sa.Float(), nullable=True))
    with op.batch_alter_table("references") as batch:
        batch.add_column(sa.Column("vocab_size", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("eos_id", sa.Integer(), nullable=True))
    op.create_table(
        "cost_models",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("cell_id", sa.Integer(), sa.ForeignKey("cells.id"), nullable=True, unique=True),
        sa.Column("experiment_id", sa.Integer(), sa.ForeignKey("experiments.id"), nullable=False, index=True),
        sa.Column("verifier", sa.String(300), nullable=False),
        sa.Column("device", sa.String(100), nullable=False),
        sa.Column("coefficients", sa.JSON(), nullable=False),
        sa.Column("samples", sa.JSON(), nullable=False),
        sa.Column("measure_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("mean_power_w", sa.Float(), nullable=True),
        sa.Column("power_source", sa.String(100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("cost_models")
    with op.batch_alter_table("references") as batch:
        batch.drop_column("eos_id")
        batch.drop_column("vocab_size")
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("predicted_wall_s")
        batch.drop_column("drafted_per_step")
        batch.drop_column("passes")
        batch.drop_column("measure")
