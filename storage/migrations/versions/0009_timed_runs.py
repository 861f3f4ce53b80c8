"""generations: every timed run's wall time (`[sweep] repeats`; wall_s is the fastest of them)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 02:45:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("wall_s_runs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("wall_s_runs")
