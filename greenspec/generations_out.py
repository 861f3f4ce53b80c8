"""`greenspec export --generations --format csv`, streamed: one row per generation the summary counts, read from the
database and written `chunk` rows at a time (`storage.stream`), so its memory stays the same at 10^6 generations as
at ten. The rows, their order and every byte written are those of the whole frame (`greenspec.frames.
generations_export`, which Parquet, Markdown and LaTeX still render at once: their layout needs every row).

Example:
    >>> write_generations_csv(session, "demo", "generations.csv")   # doctest: +SKIP
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from itertools import chain

from sqlalchemy import select

from greenspec.outputs import write_failed
from storage.cost_tables import prediction_label
from storage.db import Session
from storage.models import Generation
from storage.queries import generations_export_stmt
from storage.stream import CHUNK, frames
from workers.errors import GreenspecError


@contextmanager
def _opened(out: str):
    """`out` opened for text ("-": stdout), a failed write in one line."""
    try:
        if out == "-":
            yield sys.stdout
            return
        with open(out, "w") as fh:
            yield fh
    except OSError as err:  # a full disk or device (/dev/full)
        raise write_failed(out, "--out", err) from err


def _none_shown(session: Session, exp_id: int, experiment: str | None, all_versions: bool) -> GreenspecError:
    """Why an export found no row: no generation at all, or (without `all_versions`) only older ones."""
    stored = session.scalar(select(Generation.id).where(Generation.experiment_id == exp_id).limit(1))
    if all_versions or stored is None:
        return GreenspecError(f"no generations stored for experiment {experiment or '(newest)'}; run a sweep first")
    return GreenspecError(
        f"experiment {experiment or '(newest)'}: every stored generation is of an earlier version of its spec; "
        "pass --all-versions to export them"
    )


def write_generations_csv(
    session: Session, experiment: str | None, out: str, all_versions: bool = False, chunk: int = CHUNK
) -> int:
    """Write `export --generations` as CSV to `out` ("-" is stdout), `chunk` rows at a time; the rows written. Nothing
    is written where no row would be (one line saying why)."""
    from greenspec.frames import _experiment, versions

    exp_id = _experiment(session, experiment)
    stmt = generations_export_stmt(exp_id, versions(session, exp_id), current_only=not all_versions)
    label = prediction_label(session, exp_id)
    parts = frames(session, stmt, chunk)
    first = next(parts, None)
    if first is None:
        raise _none_shown(session, exp_id, experiment, all_versions)
    rows = 0
    with _opened(out) as fh:
        for part in chain([first], parts):
            if label is not None:  # as `greenspec.frames.labelled`
                part.insert(list(part.columns).index("measure") + 1, "predicted_for", label)
            part.to_csv(fh, index=False, header=rows == 0)
            rows += len(part)
    return rows
