"""the dashboard at scale: generations.rounds and .first_accepted (stored per generation), a covering index for the
summary's GROUP BY, (experiment, id) for the data version, (experiment, kind, state) for the queue counts

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 14:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

SUMMARY_INDEX_COLUMNS = [  # as storage.models.SUMMARY_INDEX_COLUMNS at this revision
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
BACKFILL = {  # rounds = len(accepted_per_step); first_accepted = rounds - accept_hist[0]
    "sqlite": "UPDATE generations SET rounds = json_array_length(accepted_per_step), "
    "first_accepted = json_array_length(accepted_per_step) - coalesce(json_extract(accept_hist, '$[0]'), 0)",
    "postgresql": "UPDATE generations SET rounds = json_array_length(accepted_per_step), "
    "first_accepted = json_array_length(accepted_per_step) - coalesce((accept_hist->>0)::int, 0)",
}


def upgrade() -> None:
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("rounds", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("first_accepted", sa.Integer(), nullable=True))
    dialect = op.get_bind().dialect.name
    op.execute(BACKFILL[dialect])
    if dialect == "sqlite":
        op.create_index("ix_generations_summary", "generations", [*SUMMARY_INDEX_COLUMNS, "accept_hist"])
    else:  # a json column cannot be a btree key there
        op.create_index(
            "ix_generations_summary_inc", "generations", SUMMARY_INDEX_COLUMNS, postgresql_include=["accept_hist"]
        )
    op.create_index("ix_generations_experiment_id", "generations", ["experiment_id", "id"])
    op.create_index("ix_cells_experiment_kind_state", "cells", ["experiment_id", "kind", "state"])


def downgrade() -> None:
    op.drop_index("ix_cells_experiment_kind_state", table_name="cells")
    op.drop_index("ix_generations_experiment_id", table_name="generations")
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.drop_index("ix_generations_summary" if sqlite else "ix_generations_summary_inc", table_name="generations")
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("first_accepted")
        batch.drop_column("rounds")
