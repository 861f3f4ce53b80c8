"""sampling: temperature on cells and generations (top_k, top_p), first-token acceptance counts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 14:15:00
"""
from alembic import op
import sqlalchemy as sa

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("temperature", sa.Float(), nullable=True, server_default="0"))
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("temperature", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("top_k", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("top_p", sa.Float(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("first_checked", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("first_accepted", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        for name in ("first_accepted", "first_checked", "top_p", "top_k", "temperature"):
            batch.drop_column(name)
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("temperature")
