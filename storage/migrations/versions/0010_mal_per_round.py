"""generations.mal: the paper's MAL, accepted draft tokens per round (it was per verifier pass, prefill included)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 17:10:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _set_mal(denominator: str) -> None:
    g = sa.table(
        "generations", sa.column("mal", sa.Float), sa.column("accepted", sa.Integer), sa.column(denominator, sa.Integer)
    )
    den = g.c[denominator]
    op.execute(g.update().values(mal=sa.case((den > 0, sa.cast(g.c.accepted, sa.Float) / den), else_=None)))


def upgrade() -> None:
    with op.batch_alter_table("generations") as batch:  # a generation without a round has no MAL
        batch.alter_column("mal", existing_type=sa.Float(), nullable=True)
    _set_mal("rounds")


def downgrade() -> None:
    _set_mal("steps")  # verifier passes
    with op.batch_alter_table("generations") as batch:
        batch.alter_column("mal", existing_type=sa.Float(), nullable=False)
