"""prompt keys on references and generations (match by prompt, not position); leases (one driver per experiment)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 14:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

cells = sa.table(
    "cells",
    sa.column("id", sa.Integer),
    sa.column("key", sa.String),
    sa.column("params", sa.JSON),
    sa.column("experiment_id", sa.Integer),
)
references = sa.table(
    "references", sa.column("id", sa.Integer), sa.column("cell_id", sa.Integer), sa.column("prompt_key", sa.String)
)
generations = sa.table(
    "generations", sa.column("id", sa.Integer), sa.column("cell_id", sa.Integer), sa.column("prompt_key", sa.String)
)


def upgrade() -> None:
    with op.batch_alter_table("references") as batch:
        batch.add_column(sa.Column("prompt_key", sa.String(64), nullable=True))
    with op.batch_alter_table("generations") as batch:
        batch.add_column(sa.Column("prompt_key", sa.String(64), nullable=True))
    op.create_index("ix_references_prompt_key", "references", ["experiment_id", "prompt_key"])
    op.create_index("ix_generations_prompt_key", "generations", ["experiment_id", "prompt_key"])
    op.create_table(
        "leases",
        sa.Column("experiment", sa.String(200), primary_key=True),
        sa.Column("holder", sa.String(300), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("acquired_at", sa.Float(), nullable=False),
    )
    _backfill(op.get_bind())


def _backfill(conn) -> None:
    """Old rows: a reference's key is its cell's; a generation gets the one reference of its exact prompt text."""
    refs = conn.execute(
        sa.select(references.c.id, cells.c.key, cells.c.experiment_id, cells.c.params).join(
            cells, cells.c.id == references.c.cell_id
        )
    ).all()
    by_prompt: dict[tuple, set[str]] = {}
    for rid, key, exp_id, params in refs:
        conn.execute(references.update().where(references.c.id == rid).values(prompt_key=key))
        by_prompt.setdefault((exp_id, (params or {}).get("prompt")), set()).add(key)
    gens = conn.execute(
        sa.select(generations.c.id, cells.c.experiment_id, cells.c.params).join(
            cells, cells.c.id == generations.c.cell_id
        )
    ).all()
    for gid, exp_id, params in gens:
        keys = by_prompt.get((exp_id, (params or {}).get("prompt")), set())
        if len(keys) == 1:  # ambiguous (same prompt, several references): left unmatched rather than guessed
            conn.execute(generations.update().where(generations.c.id == gid).values(prompt_key=next(iter(keys))))


def downgrade() -> None:
    op.drop_table("leases")
    op.drop_index("ix_generations_prompt_key", "generations")
    op.drop_index("ix_references_prompt_key", "references")
    with op.batch_alter_table("generations") as batch:
        batch.drop_column("prompt_key")
    with op.batch_alter_table("references") as batch:
        batch.drop_column("prompt_key")
