"""sampling: temperature on cells and generations (top_k, top_p), first_checked; the summary index covers them

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 14:15:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SUMMARY_INDEX_COLUMNS = [  # as at revision 0004
    "experiment_id",
    "strategy",
    "draft",
    "task",
    "k",
    "regime",
    "prompt_index",
    "n_tokens",
    "wall_s",
    "draft_s",
    "drafted",
    "accepted",
    "rounds",
    "first_accepted",
    "fastpath_rejects",
    "tokens_per_s",
    "energy_j",
    "j_per_100_tokens",
    "mean_power_w",
    "rouge_l",
    "exact_match",
    "power_source",
    "power_measured",
]


def _summary_index(columns: list[str]) -> None:
    """Recreate the summary's covering index over `columns` (SQLite: JSON included; elsewhere INCLUDE)."""
    sqlite = op.get_bind().dialect.name == "sqlite"
    name = "ix_generations_summary" if sqlite else "ix_generations_summary_inc"
    op.drop_index(name, table_name="generations")
    if sqlite:
        op.create_index(name, "generations", [*columns, "accept_hist"])
    else:
        op.create_index(name, "generations", columns, postgresql_include=["accept_hist"])


def upgrade() -> None:
    with op.batch_alter_table("cells") as batch:
        batch.add_column(sa.Column("temperature", sa.Float(), nullable=True, server_default="0"))
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("temperature", sa.Float(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("top_k", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("top_p", sa.Float(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("first_checked", sa.Integer(), nullable=True))
    _summary_index([*SUMMARY_INDEX_COLUMNS, "temperature", "first_checked"])


def downgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        for name in ("first_checked", "top_p", "top_k", "temperature"):
            batch.drop_column(name)
    _summary_index(SUMMARY_INDEX_COLUMNS)
    with op.batch_alter_table("cells") as batch:
        batch.drop_column("temperature")
