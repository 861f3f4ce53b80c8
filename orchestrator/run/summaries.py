"""What a finished run leaves its readers: the experiment's summaries and the other frames the dashboard's pages read
whole, stored at the data version they were computed at (`analysis.summary.store_summaries`, `storage.stored_frames`),
and the spec's versions the summaries' rows are marked by.

Computing a summary with its intervals reads every counted generation and bootstraps every cell (tens of seconds
at 10^6 generations); the driver, the database's one writer, does it once when a run ends (`keep_summaries`), and the
readers, which never write (the dashboard, `greenspec export` and `report`, the library's `results()`), show the
stored one while nothing it was computed from has changed, and compute their own otherwise (a run still going, a
database from before the table existed). A run that ends with nothing new to store only checks the versions.

Example:
    >>> keep_summaries(Session, exp_id)       # at the run's end, under its lease
    >>> v = versions(session, exp_id)         # which of its generations the stored spec still makes
"""

from __future__ import annotations

import logging
import time

from analysis.findings import FINDINGS, store_findings
from analysis.summary import store_summaries
from orchestrator.run.options import Sessions
from orchestrator.run.spec import parse_stored
from storage.db import Session
from storage.models import Experiment
from storage.queries import reference_cells_frame
from storage.summary import Versions
from workers.errors import GreenspecError

logger = logging.getLogger(__name__)


def keep_summaries(sessions: Sessions, exp_id: int) -> list[str]:
    """Store the experiment's summaries, the other frames its pages read whole, and its findings, those not stored
    at their current version (module doc); their names."""
    t0 = time.perf_counter()
    with sessions() as s:
        written = store_summaries(s, exp_id, versions(s, exp_id))  # each frame committed as it is stored
        if store_findings(s, exp_id, parse_stored):  # from the summary just stored
            written.append(FINDINGS)
    if written:
        logger.info("experiment %s: stored %s in %.1f s", exp_id, ", ".join(written), time.perf_counter() - t0)
    return written


def _reference_key(spec, prompt: str) -> str:
    """The key the spec gives the reference cell of `prompt` (as `orchestrator.cells.reference_cells`)."""
    from orchestrator.run.cells import content_key, verifier_identity

    ident = {
        "kind": "reference",
        "verifier": verifier_identity(spec),
        "prompt": prompt,
        "max_new_tokens": spec.sweep.max_new_tokens,
    }
    return content_key(ident)


def stored_spec(session: Session, exp_id: int):
    """The experiment's stored spec, its paths resolved as the run resolved them; None where it does not parse."""
    from pathlib import Path

    from orchestrator.run.spec import parse_spec
    from orchestrator.run.spec_paths import resolve_paths

    exp = session.get(Experiment, exp_id)
    try:
        spec = parse_spec(exp.spec_toml or "")
        return resolve_paths(spec, Path(exp.spec_path).parent) if exp.spec_path else spec
    except GreenspecError:  # an empty or foreign spec text: no version information, every row counts as current
        return None


def versions(session: Session, exp_id: int) -> Versions | None:
    """Which of the experiment's generations its stored spec still makes: its strategies, and the prompt keys of the
    reference cells it no longer makes. A reference cell is current when the spec gives its prompt the same key
    (same verifier, max_new_tokens and greenspec) and it is the newest such cell of its task and prompt index; where
    the spec reproduces no stored key at all (a spec rewritten before it ran, as the demo's built models are), the
    newest reference cell of each task and prompt index is. None when the stored spec does not parse."""
    spec = stored_spec(session, exp_id)
    if spec is None:
        return None
    refs = reference_cells_frame(session, exp_id)
    tasks = {t.name for t in spec.tasks}
    refs = refs[refs["task"].isin(tasks)]
    same = refs[[p is not None and _reference_key(spec, p) == k for p, k in zip(refs["prompt"], refs["key"])]]
    pool = same if len(same) else refs
    current = set(pool.sort_values("id").groupby(["task", "prompt_index"]).tail(1)["key"])
    older = frozenset(set(reference_cells_frame(session, exp_id)["key"]) - current)
    return Versions(strategies=frozenset(s.name for s in spec.strategies), older=older)
