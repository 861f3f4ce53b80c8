"""indexes for the dashboard's reads: the data version (experiment, id) and the queue counts (experiment, kind, state)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 14:00:00
"""
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_generations_experiment_id", "generations", ["experiment_id", "id"])
    op.create_index("ix_cells_experiment_kind_state", "cells", ["experiment_id", "kind", "state"])


def downgrade() -> None:
    op.drop_index("ix_cells_experiment_kind_state", table_name="cells")
    op.drop_index("ix_generations_experiment_id", table_name="generations")
