"""instance_bases: the manifest written beside each base (`<file>.manifest.json`: the corpus files it was trained
on), its path and sha256

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 19:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instance_bases") as batch:
        batch.add_column(sa.Column("manifest_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("manifest_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instance_bases") as batch:
        batch.drop_column("manifest_sha256")
        batch.drop_column("manifest_path")
