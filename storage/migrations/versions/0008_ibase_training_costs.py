"""instance_bases: what an out-of-core training cost (partitions, memory budget, peak RSS, CPU seconds) and how
its energy was attributed

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 17:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

COLUMNS = (
    ("partitions", sa.Integer()),
    ("memory_budget_bytes", sa.BigInteger()),
    ("peak_rss_bytes", sa.BigInteger()),
    ("cpu_s", sa.Float()),
    ("energy_attribution", sa.String(length=100)),
)


def upgrade() -> None:
    with op.batch_alter_table("instance_bases") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instance_bases") as batch:
        for name, _ in COLUMNS:
            batch.drop_column(name)
