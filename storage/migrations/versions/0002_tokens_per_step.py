"""generations.tokens_per_step: new tokens per round, so a drill-down can split draft and verifier tokens

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("tokens_per_step", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("tokens_per_step")
