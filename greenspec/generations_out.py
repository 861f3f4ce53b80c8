"""`greenspec export --generations --format csv`, streamed: one row per generation the summary counts, read from the
database and written `chunk` rows at a time as the driver returns them (`storage.stream.chunks`), through Python's
csv writer, so its memory stays the same at 10^6 generations as at ten. The rows, their order and every byte
written are those of the whole frame's `to_csv` (`greenspec.frames.generations_export`, which Parquet, Markdown and
LaTeX still render at once: their layout needs every row): pandas writes with the same csv writer, a float as its
shortest repr (as `str` does), NULL as an empty field, and the frame's integer columns hold no NULL.

Example:
    >>> write_generations_csv(session, exp_id, "generations.csv", versions(session, exp_id))   # doctest: +SKIP
"""

from __future__ import annotations

import csv
import sys
from contextlib import contextmanager
from itertools import chain

from greenspec.outputs import write_failed
from storage.cost_tables import prediction_label
from storage.db import Session
from storage.queries import generations_export_rows, has_generations
from storage.stream import CHUNK
from storage.summary import Versions
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
    if all_versions or not has_generations(session, exp_id):
        return GreenspecError(f"no generations stored for experiment {experiment or '(newest)'}; run a sweep first")
    return GreenspecError(
        f"experiment {experiment or '(newest)'}: every stored generation is of an earlier version of its spec; "
        "pass --all-versions to export them"
    )


def write_generations_csv(
    session: Session,
    exp_id: int,
    out: str,
    versions: Versions | None = None,
    all_versions: bool = False,
    experiment: str | None = None,
    chunk: int = CHUNK,
) -> int:
    """Write `export --generations` of experiment `exp_id` (named `experiment` in messages; its rows' `versions`,
    `orchestrator.run.summaries.versions`) as CSV to `out` ("-" is stdout), `chunk` rows at a time; the rows written. Nothing
    is written where no row would be (one line saying why)."""
    label = prediction_label(session, exp_id)
    columns, parts = generations_export_rows(session, exp_id, versions, not all_versions, chunk)
    first = next(parts, None)
    if first is None:
        raise _none_shown(session, exp_id, experiment, all_versions)
    at = columns.index("measure") + 1  # where `greenspec.frames.labelled` puts `predicted_for`
    rows = 0
    with _opened(out) as fh:
        writer = csv.writer(fh, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)  # as pandas' to_csv
        writer.writerow(columns if label is None else [*columns[:at], "predicted_for", *columns[at:]])
        for part in chain([first], parts):
            writer.writerows(part if label is None else ((*r[:at], label, *r[at:]) for r in part))
            rows += len(part)
    return rows
