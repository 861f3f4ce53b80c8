"""pace: the machine's pace (one fixed pass, timed) before every timed greedy generation of a replayed run, so that
validation can take the machine's drift out of the round-cost table's error (`storage.validation.prediction_pairs`)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 11:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("pace_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("pace_s")
