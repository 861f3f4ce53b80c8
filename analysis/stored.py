"""What a stored summary (`storage.stored_frames`) is keyed by: its name (the aggregation, and whether its rows are
marked by the spec's versions) and the version it was computed at. A stored summary is shown only while that version
is the one a reader would compute it at now, so a version names everything its values depend on:

- the experiment's rows (`storage.stored_frames.rows_version`: its generations, its newest round-cost table);
- the spec's versions (`storage.summary.Versions`: which strategies and prompt keys are current), as a digest;
- the code that computes it (`RECIPE`: the modules the summary, its intervals and its model error are computed by,
  hashed from their source, with numpy's and pandas' versions), so a greenspec with other arithmetic never shows a
  summary an older one stored.

The other frames a page reads whole and would otherwise compute over every row are stored beside the summaries, at
the version of the same rows (`FRAMES`, read through `frame`): the cost model's validation (`VALIDATION`: it finds
the generations timed twice in a scan of every one), Table 5 of the references (`REFERENCES_TABLE5`, the Paper page)
and of every text source (`TABLE5`, the Texts page), and the rounds by accepted length per grid coordinate
(`ACCEPTED`, the Acceptance page's histogram, which filters them by the sidebar's selection).

Example:
    >>> name, version = summary_name(pooled=False, versions=v), summary_version(session, exp_id, v)
    >>> errors = prediction_error(session, exp_id)   # stored at the current version, else computed
    >>> table5 = frame(session, exp_id, TABLE5)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from functools import cache

import numpy as np
import pandas as pd

from storage import browse, validation
from storage.db import Session
from storage.stored_frames import read_frame, rows_version
from storage.summary import Versions

VALIDATION = "prediction-error"  # the stored `storage.validation.prediction_error` of the experiment's own timings
REFERENCES_TABLE5 = "table5-references"
TABLE5 = "table5-sources"
ACCEPTED = "accepted-lengths"


def _references_table5(session: Session, exp_id: int) -> pd.DataFrame:
    from analysis.paper import redundancy_frame  # deferred: the draft registry

    return redundancy_frame(browse.reference_tokens_frame(session, exp_id))


def _table5(session: Session, exp_id: int) -> pd.DataFrame:
    from analysis.tables import redundancy_by_source

    return redundancy_by_source(browse.redundancy_texts(session, exp_id), browse.references_frame(session, exp_id))


FRAMES = {  # name -> how it is computed from the rows (session, exp_id)
    VALIDATION: validation.prediction_error,
    REFERENCES_TABLE5: _references_table5,
    TABLE5: _table5,
    ACCEPTED: browse.accepted_length_table,
}
RECIPE = (  # the modules a summary's values are computed by (their source is hashed into its version)
    "storage.summary",
    "storage.stream",
    "storage.validation",
    "storage.stored_frames",
    "analysis.summary",
    "analysis.intervals",
    "analysis.stats",
    "analysis.model_error",
    "analysis.columns",
    "analysis.stored",
    "analysis.paper",
    "analysis.tables",
    "storage.browse",
    "workers.metrics",
    "workers.decoding.passes",
    "workers.decoding.costmodel",
)


@cache
def recipe() -> str:
    """A digest of the code that computes a summary (`RECIPE`'s source, numpy's and pandas' versions)."""
    h = hashlib.sha256(f"numpy {np.__version__} pandas {pd.__version__}".encode())
    for name in RECIPE:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        h.update(name.encode())
        if origin and origin.endswith(".py"):
            with open(origin, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()[:16]


def versions_digest(versions: Versions | None) -> str:
    """A short digest of `versions` ("all" without: every generation counts as current)."""
    if versions is None:
        return "all"
    text = json.dumps([sorted(versions.strategies), sorted(versions.older)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def summary_name(pooled: bool, versions: Versions | None) -> str:
    """The stored summary's name: its aggregation, and "-versions" where its rows are marked by the spec's versions
    (the export's, the library's) rather than all current (the dashboard's)."""
    return "summary" + ("-pooled" if pooled else "") + ("" if versions is None else "-versions")


def summary_version(session: Session, exp_id: int, versions: Versions | None) -> str:
    """The version a summary of experiment `exp_id` computed now would be stored at (module doc)."""
    return f"{rows_version(session, exp_id)}/v{versions_digest(versions)}/r{recipe()}"


def frame(session: Session, exp_id: int, name: str) -> pd.DataFrame:
    """The frame `name` of `FRAMES` of experiment `exp_id`: the one stored at its current data version
    (`analysis.summary.store_summaries`) where there is one, else computed."""
    stored = read_frame(session, exp_id, name, summary_version(session, exp_id, None))
    return FRAMES[name](session, exp_id) if stored is None else stored


def prediction_error(session: Session, exp_id: int, timed_from: int | None = None) -> pd.DataFrame:
    """`storage.validation.prediction_error` of experiment `exp_id`: the stored one (`frame`) where `timed_from` is None,
    else computed."""
    if timed_from is None:
        return frame(session, exp_id, VALIDATION)
    return validation.prediction_error(session, exp_id, timed_from)
