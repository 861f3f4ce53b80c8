"""the summary's covering index in the summary's grouping order (its keys, then prompt_index and prompt_key): the
newest generation of every coordinate and prompt (`storage.summary.latest_generations`) and the per-cell sums stream
through the index in order, with no temporary B-tree over every generation

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 13:30:00
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

GROUPED = ["experiment_id", "strategy", "draft", "task", "k", "regime"]
FIGURES = [
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
AT_0012 = [*GROUPED, "prompt_index", *FIGURES, "temperature", "first_checked", "measure", "prompt_key"]
AT_0017 = [*GROUPED, "temperature", "measure", "prompt_index", "prompt_key", *FIGURES, "first_checked"]


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
    _summary_index(AT_0017)


def downgrade() -> None:
    _summary_index(AT_0012)
