"""grid digest: the digest of the grid whose cells an experiment registered last, so that a resume of that very grid
(a million cells) skips expanding and registering it again (`orchestrator.run.driver.register`)

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 17:20:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("grid_digest", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("grid_digest")
