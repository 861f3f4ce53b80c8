"""stored_frames: an experiment's computed summaries kept in the database, each with the data version it was computed
at (`storage.stored_frames`): a reader shows one only while its version is the experiment's current one

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 17:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stored_frames",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("version", sa.String(length=300), nullable=False),
        sa.Column("frame", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["experiment_id"], ["experiments.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("experiment_id", "name"),
    )


def downgrade() -> None:
    op.drop_table("stored_frames")
