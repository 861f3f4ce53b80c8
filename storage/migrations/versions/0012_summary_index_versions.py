"""the summary's covering index gains measure and prompt_key: the summary groups by measure and pairs each
generation with plain's of the same prompt key, from the index alone

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 23:00:00
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

SUMMARY_INDEX_COLUMNS = [  # as at revision 0005
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
    "temperature",
    "first_checked",
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
    _summary_index([*SUMMARY_INDEX_COLUMNS, "measure", "prompt_key"])


def downgrade() -> None:
    _summary_index(SUMMARY_INDEX_COLUMNS)
