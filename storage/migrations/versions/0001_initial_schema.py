"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 07:18:47.149788
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("spec_path", sa.Text(), nullable=True),
        sa.Column("spec_toml", sa.Text(), nullable=False),
        sa.Column("spec_hash", sa.String(length=64), nullable=False),
        sa.Column("device", sa.String(length=100), nullable=True),
        sa.Column("idle_power_w", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "cells",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("strategy", sa.String(length=100), nullable=True),
        sa.Column("draft", sa.String(length=32), nullable=True),
        sa.Column("task", sa.String(length=100), nullable=True),
        sa.Column("corpus", sa.String(length=100), nullable=True),
        sa.Column("prompt_index", sa.Integer(), nullable=True),
        sa.Column("k", sa.Integer(), nullable=True),
        sa.Column("regime", sa.String(length=16), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("experiment_id", "key", name="uq_cells_experiment_key"),
    )
    with op.batch_alter_table("cells", schema=None) as batch_op:
        batch_op.create_index("ix_cells_experiment_state", ["experiment_id", "state"], unique=False)

    op.create_table(
        "power_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("t_s", sa.Float(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("power_w", sa.Float(), nullable=True),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("measured", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("power_samples", schema=None) as batch_op:
        batch_op.create_index("ix_power_samples_experiment_t", ["experiment_id", "t_s"], unique=False)

    op.create_table(
        "generations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cell_id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("strategy", sa.String(length=100), nullable=False),
        sa.Column("draft", sa.String(length=32), nullable=False),
        sa.Column("task", sa.String(length=100), nullable=False),
        sa.Column("prompt_index", sa.Integer(), nullable=False),
        sa.Column("k", sa.Integer(), nullable=False),
        sa.Column("regime", sa.String(length=16), nullable=False),
        sa.Column("n_prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("n_tokens", sa.Integer(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("drafted", sa.Integer(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("acceptance", sa.Float(), nullable=True),
        sa.Column("mal", sa.Float(), nullable=False),
        sa.Column("accept_hist", sa.JSON(), nullable=False),
        sa.Column("accepted_per_step", sa.JSON(), nullable=False),
        sa.Column("fastpath_rejects", sa.Integer(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.Column("draft_s", sa.Float(), nullable=False),
        sa.Column("verify_s", sa.Float(), nullable=False),
        sa.Column("tokens_per_s", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("mean_power_w", sa.Float(), nullable=True),
        sa.Column("j_per_100_tokens", sa.Float(), nullable=True),
        sa.Column("tokens_per_j", sa.Float(), nullable=True),
        sa.Column("power_source", sa.String(length=100), nullable=True),
        sa.Column("power_measured", sa.Boolean(), nullable=True),
        sa.Column("rouge_l", sa.Float(), nullable=True),
        sa.Column("exact_match", sa.Boolean(), nullable=True),
        sa.Column("bridged", sa.Boolean(), nullable=False),
        sa.Column("stopped", sa.String(length=32), nullable=False),
        sa.Column("device", sa.String(length=100), nullable=False),
        sa.Column("tokens", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cell_id"],
            ["cells.id"],
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cell_id"),
    )
    with op.batch_alter_table("generations", schema=None) as batch_op:
        batch_op.create_index(
            "ix_generations_group", ["experiment_id", "strategy", "task", "k", "regime"], unique=False
        )

    op.create_table(
        "instance_bases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cell_id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("corpus", sa.String(length=100), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("window", sa.Integer(), nullable=False),
        sa.Column("order", sa.String(length=16), nullable=False),
        sa.Column("tokenizer_id", sa.String(length=100), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("instances", sa.Integer(), nullable=False),
        sa.Column("nodes_before_prune", sa.Integer(), nullable=False),
        sa.Column("nodes_after_prune", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("train_s", sa.Float(), nullable=False),
        sa.Column("energy_j", sa.Float(), nullable=True),
        sa.Column("power_source", sa.String(length=100), nullable=True),
        sa.Column("power_measured", sa.Boolean(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["cell_id"],
            ["cells.id"],
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cell_id"),
    )
    with op.batch_alter_table("instance_bases", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_instance_bases_experiment_id"), ["experiment_id"], unique=False)

    op.create_table(
        "references",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("cell_id", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("task", sa.String(length=100), nullable=False),
        sa.Column("prompt_index", sa.Integer(), nullable=False),
        sa.Column("prompt_text", sa.Text(), nullable=False),
        sa.Column("prompt_tokens", sa.JSON(), nullable=False),
        sa.Column("tokens", sa.JSON(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cell_id"],
            ["cells.id"],
        ),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("cell_id"),
    )
    with op.batch_alter_table("references", schema=None) as batch_op:
        batch_op.create_index("ix_references_task_prompt", ["experiment_id", "task", "prompt_index"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("references", schema=None) as batch_op:
        batch_op.drop_index("ix_references_task_prompt")

    op.drop_table("references")
    with op.batch_alter_table("instance_bases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_instance_bases_experiment_id"))

    op.drop_table("instance_bases")
    with op.batch_alter_table("generations", schema=None) as batch_op:
        batch_op.drop_index("ix_generations_group")

    op.drop_table("generations")
    with op.batch_alter_table("power_samples", schema=None) as batch_op:
        batch_op.drop_index("ix_power_samples_experiment_t")

    op.drop_table("power_samples")
    with op.batch_alter_table("cells", schema=None) as batch_op:
        batch_op.drop_index("ix_cells_experiment_state")

    op.drop_table("cells")
    op.drop_table("experiments")
