"""Reads for the comparison with the seed paper: the greedy reference continuations as token ids and text."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Reference


def reference_tokens_frame(session: Session, exp_id: int) -> pd.DataFrame:
    """Every reference continuation of an experiment: task, prompt_index, tokens (verifier ids), text."""
    cols = ["task", "prompt_index", "tokens", "text"]
    rows = session.execute(
        select(*(getattr(Reference, c) for c in cols))
        .where(Reference.experiment_id == exp_id)
        .order_by(Reference.task, Reference.prompt_index)
    ).all()
    return pd.DataFrame(rows, columns=cols)
