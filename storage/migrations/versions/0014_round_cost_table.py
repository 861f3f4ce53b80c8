"""cost_models: the measured round-cost table (`workers.decoding.costmodel.RoundCosts` as JSON) replaces the linear model's
coefficients; its samples are timed rounds (regime, kind, n, context, seconds). A linear model stored before has no
table (NULL): replay refuses it and the cost model is measured again.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 18:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cost_models") as batch:
        batch.add_column(sa.Column("costs", sa.JSON(), nullable=True))
        batch.drop_column("coefficients")


def downgrade() -> None:
    with op.batch_alter_table("cost_models") as batch:
        batch.add_column(sa.Column("coefficients", sa.JSON(), nullable=False, server_default="{}"))
        batch.drop_column("costs")
