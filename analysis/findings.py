"""The findings of one experiment computed: the seed paper's claims and the future-work, token-tree and k = "auto"
targets its grid can answer, each with its verdict, and those it cannot answer, each with the reason; and the frame
stored with the run.

The verdicts are `analysis.checks`' (claims, targets, trees): each read off a 95% interval over prompts, speed beyond
a practical margin, a family of verdicts Holm-corrected. The strategies each check compares are read off the
experiment's spec, which the caller parses (`orchestrator.run.spec.parse_stored`: this layer reads no TOML).

The model error. A replayed cell's time is the round-cost table's prediction; its validated error per regime and
width band is already inside every replayed speed interval the checks read (`analysis.model_error`, applied by
`summary_frame`), so a cell against a fixed threshold (speedup > 1) adds no second margin. A paired difference of two
replayed cells (bootstrapped over prompts from their predicted figures) and the break-even's line carry it as a
margin instead: the spread of the regime's band errors (`model_errors`), what two bands erring differently can move
a comparison by. A regime with replayed cells but no validated band has no known error: its speed margins are
unknown (NaN, and a NaN bound is inconclusive), so its speed verdicts are inconclusive by rule, and their detail says
so.

Stored with the run. Pairing the comparisons reads every counted generation (seconds at 10^5 generations, tens of
seconds and a gigabyte at 10^6), so a run's end stores the frame (`store_findings`, called by
`orchestrator.run.summaries.keep_summaries`) at a version of everything it is computed from: the summary's data
version and code (`analysis.stored.summary_version`), the stored spec's text and this code (`findings_version`).
`stored_findings` reads it back while that version is current; `greenspec.findings.read_findings` computes it
otherwise.

Example:
    >>> frame = verdicts_frame(summary, spec, "", prompts, errors, bounds)
    >>> store_findings(session, exp_id, parse_stored)  # at a run's end
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import pandas as pd

from analysis import stats
from analysis.checks.breakeven import TARGET as BREAK_EVEN
from analysis.checks.check import UNCACHED, Check, one_measure
from analysis.checks.claims import BEATS_NGRAM, UNCACHED_GAIN, check_claims, own_domains, session_4gram
from analysis.checks.families import DECISIVE, family_of
from analysis.checks.rules import ALPHA, PRACTICAL_MARGIN, TOO_FEW
from analysis.checks.targets import Roles, check_all, roles
from analysis.checks.trees import tree_checks, tree_roles
from storage.stored_frames import read_frame, stored_versions, write_frame

PAPER, OUTPUT, FUTURE, TREES = "paper's claims", "output check", "future-work targets", 'token trees and k = "auto"'
SECTIONS = (PAPER, OUTPUT, FUTURE, TREES)
COLUMNS = [
    "section",
    "target",
    "task",
    "regime",
    "k",
    "verdict",
    "estimate",
    "lo",
    "hi",
    "prompts",
    "family",
    "family_size",
    "correction",
    "reason",
    "detail",
]
DIAGONAL = "domain diagonal: own base accepts most"
ENERGY = "uncached energy ratio tracks speedup"
EXACT = "exact match 1.0"
RULES = (
    f"each verdict read off a 95% interval over prompts; speed beyond a {PRACTICAL_MARGIN:.0%} margin plus the "
    "regime's validated model error, within it a tie; no verdict under "
    f"{stats.MIN_VERDICT_PROMPTS} prompts; each family Holm-corrected at one-sided {ALPHA:.1%}"
)
UNKNOWN_ERROR = "no generation both timed and replayed validates the predicted speeds here: inconclusive by rule"


def model_errors(
    errors: pd.DataFrame | None, summary: pd.DataFrame, bounds: Mapping[tuple[str, str], tuple] | None = None
) -> dict[str, float]:
    """{regime: relative model error of replayed speeds} for the checks' `model_error`.

    With `bounds` (`analysis.model_error.error_bounds`: per regime and width band the 95% interval of the median
    ln(predicted / measured)): the spread of the regime's bands, max upper bound less min lower bound. A paired
    difference of two replayed speedups, or the break-even's line through them, is off by at most that much of its
    reference where two bands (or a band and plain) err differently; a cell against a fixed threshold adds nothing,
    its own interval holds its error (`analysis.checks.rules.cell_error`). A regime validated without bounds
    (fewer than MIN_PAIRS pairs in every band) or with replayed cells and no pair at all: NaN, its speed verdicts
    inconclusive. Without `bounds`: 0 for a validated regime (at least one pair), NaN for one with none."""
    out: dict[str, float] = {}
    if errors is not None and not errors.empty:
        for r in errors[(errors["band"] == "all") & (errors["pairs"] > 0)].itertuples():
            out[r.regime] = 0.0 if bounds is None else math.nan
    for regime in {r for r, _ in bounds or {}}:
        los, his = zip(*((lo, hi) for (r, _), (lo, hi, _) in bounds.items() if r == regime))
        out[regime] = max(0.0, max(his) - min(los))
    replayed = summary[summary["measure"] == "replay"] if "measure" in summary else summary.iloc[:0]
    for regime in sorted(set(replayed["regime"]) - set(out)):
        out[regime] = math.nan
    return out


def _gap(section: str, target: str, reason: str, regime: str = "") -> dict:
    return {"section": section, "target": target, "task": "", "regime": regime, "verdict": stats.NOT_TESTABLE} | {
        "reason": reason,
        "detail": reason,
    }


def _drafted(df: pd.DataFrame, regime: str) -> pd.DataFrame:
    rows = one_measure(df)
    return rows[(rows["regime"] == regime) & (rows["k"] > 0)]


def paper_gaps(df: pd.DataFrame, own: dict[str, str], ngram: str | None, why: str) -> dict[str, str]:
    """{claim (its target or family): why this grid cannot answer it} for the paper's claims it cannot answer."""
    out = {}
    uncached = not _drafted(df, UNCACHED).empty
    olifant = why or (
        "no olifant base drafting alone from a corpus named like a task (its own domain)" if not own else ""
    )
    base_claims = (DIAGONAL, BEATS_NGRAM, UNCACHED_GAIN)
    for claim in base_claims:
        if olifant:
            out[claim] = olifant
        elif not uncached:
            out[claim] = "no uncached cells with a draft"
    if DIAGONAL not in out and len(own) < 2:
        out[DIAGONAL] = f"needs two olifant bases each on its own domain; this grid has {len(own)}"
    if BEATS_NGRAM not in out and ngram is None:
        out[BEATS_NGRAM] = "no in-session 4-gram strategy (a draft with n = 4 that needs no artifact)"
    if _drafted(df, "cached").empty:
        out[BREAK_EVEN] = "no cached cells with a draft"
    if not uncached:
        out[ENERGY] = "no uncached cells with a draft"
    return out


def future_gaps(spec, why: str, targets: set[str]) -> list[dict]:
    """The future-work, tree and auto-k targets the spec has no strategies for, and those whose strategies have no
    results yet (no check among `targets` names them), each with the reason."""
    if spec is None:
        return [_gap(FUTURE, "the future-work targets", why), _gap(TREES, "the tree and auto-k targets", why)]
    r, (trees, auto) = roles(spec), tree_roles(spec)
    kinds = [
        (
            FUTURE,
            "distilled acceptance > corpus-trained",
            r.distilled,
            "a distilled strategy with a corpus-trained twin",
        ),
        (FUTURE, "hybrid >= its better part", r.hybrid, "a hybrid strategy"),
        (FUTURE, "adaptive >= fixed length", r.adaptive, "an adaptive strategy with a fixed-length twin"),
        (TREES, "token tree beats its chain", trees, "a token-tree strategy with a chain twin"),
        (TREES, 'k = "auto" >= the best fixed k', auto, 'a k = "auto" strategy with a fixed-k twin'),
    ]
    out = []
    for section, target, have, what in kinds:
        if not have:
            out.append(_gap(section, target, f"the spec has no {what}"))
        for name, _ in have:
            if not any(t.startswith(f"{name} ") for t in targets):
                out.append(_gap(section, f"{name}: {target}", f"no results of {name} (or of what it is compared with)"))
    return out


def _unvalidated(c: Check, errors: dict[str, float]) -> Check:
    """A check in a regime whose model error is unknown: its NaN margins named, a speed verdict inconclusive."""
    e = errors.get(c.regime)
    speed = "margin nan" in c.detail or "model error +-nan" in c.detail or c.target == BREAK_EVEN
    if e is None or e == e or not speed:
        return c
    detail = c.detail.replace("margin nan", "margin unknown").replace("model error +-nan%", "model error unknown")
    detail = detail.replace("[nan, nan]", "[no interval]") + f"; {c.regime}: {UNKNOWN_ERROR}"
    same_rounds = c.verdict == stats.TIE and "the same rounds" in c.detail  # identical passes: equal times
    verdict = c.verdict if same_rounds else stats.INCONCLUSIVE
    return Check(c.target, c.task, c.regime, verdict, detail, c.figure, c.k, c.p, c.family, c.before, c.family_size)


def _reason(c: Check) -> str:
    """Why a verdict is inconclusive (or "" for a decisive one)."""
    if c.verdict != stats.INCONCLUSIVE:
        return ""
    if UNKNOWN_ERROR in c.detail:
        return f"model error unknown in {c.regime}"
    if c.before in DECISIVE:
        return f"{c.before} alone, not after Holm (family of {c.family_size})"
    if TOO_FEW in c.detail or (c.figure is not None and 0 < c.figure.n < stats.MIN_VERDICT_PROMPTS):
        return f"too few prompts (a verdict needs {stats.MIN_VERDICT_PROMPTS})"
    if c.detail == "missing" or "missing" in c.detail.split("; "):
        return "a cell it compares is missing"
    if "no per-prompt data" in c.detail:
        return "no per-prompt data"
    if c.detail.startswith("too few"):
        return c.detail
    return "the interval straddles the threshold or margin"


def _row(section: str, c: Check) -> dict:
    f = c.figure
    size = c.family_size if c.verdict not in (stats.NOT_TESTABLE, stats.BY_CONSTRUCTION) else 0
    return {
        "section": section,
        "target": c.target,
        "task": c.task,
        "regime": c.regime,
        "k": c.k,
        "verdict": c.verdict,
        "estimate": f.value if f is not None else math.nan,
        "lo": f.lo if f is not None else math.nan,
        "hi": f.hi if f is not None else math.nan,
        "prompts": f.n if f is not None and f.n else None,
        "family": family_of(c),
        "family_size": size,
        "correction": f"Holm over {size}" if size > 1 else ("none (one verdict)" if size == 1 else ""),
        "reason": _reason(c) or (c.detail if c.verdict == stats.NOT_TESTABLE else ""),
        "detail": c.detail,
    }


# wide: the run's frames, its spec's roles and what the grid cannot answer, each read once by `findings_frame`
def _checks(
    df: pd.DataFrame, spec, prompts, errors: dict[str, float], own: dict[str, str], ngram: str | None, gaps: dict
) -> list[tuple[str, Check]]:
    """Every check the grid answers, each with its section; the paper's claims in `gaps` left out (no spec: the
    spec-free claims and the output check only)."""
    claims = [c for c in check_claims(df, own, ngram, prompts, errors) if family_of(c) not in gaps]
    out = [(PAPER, c) for c in claims]
    for c in check_all(df, roles(spec) if spec is not None else Roles(), prompts, errors):
        out.append((OUTPUT if c.target == EXACT else FUTURE, c))
    if spec is not None:
        out += [(TREES, c) for c in tree_checks(df, tree_roles(spec), prompts, errors)]
    return out


def verdicts_frame(  # wide: the frames a caller has read, each once, and the parsed spec with why there is none
    summary: pd.DataFrame,
    parsed,
    why: str = "",
    prompts: pd.DataFrame | None = None,
    errors: pd.DataFrame | None = None,
    bounds: Mapping[tuple[str, str], tuple] | None = None,
) -> pd.DataFrame:
    """One row per verdict (COLUMNS) in SECTIONS order, and one "not testable here" row per claim or target the
    grid cannot answer, with the reason. `summary`: `analysis.summary.summary_frame`; `parsed`: the experiment's Spec,
    or None and `why` there is none (`orchestrator.run.spec.parse_stored`); `prompts`: `storage.summary.prompt_frame` (pairs the comparisons); `errors`:
    `storage.validation.prediction_error` (the model error per regime); `bounds`: `analysis.model_error.error_bounds` (per
    regime and band; `model_errors`)."""
    if summary.empty:
        rows = [_gap(s, "every claim and target", "no results yet") for s in (PAPER, FUTURE, TREES)]
        return pd.DataFrame(rows, columns=COLUMNS)
    me = model_errors(errors, summary, bounds)
    own, ngram = (own_domains(parsed), session_4gram(parsed)) if parsed is not None else ({}, None)
    gaps = paper_gaps(summary, own, ngram, why)
    checks = _checks(summary, parsed, prompts, me, own, ngram, gaps)
    rows = [_row(section, _unvalidated(c, me)) for section, c in checks]
    rows += [_gap(PAPER, claim, reason) for claim, reason in gaps.items()]
    rows += future_gaps(parsed, why, {c.target for _, c in checks})
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["k"] = out["k"].astype("Int64")
    out["prompts"] = out["prompts"].astype("Int64")
    out["family_size"] = out["family_size"].fillna(0).astype(int)
    order = out["section"].map({s: i for i, s in enumerate(SECTIONS)})
    out = out.assign(_o=order).sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)
    out.attrs["model_error"] = me
    return out.fillna({c: "" for c in ("task", "regime", "family", "correction", "reason", "detail")})


FINDINGS = "findings"  # the stored frame's name (`storage.stored_frames`)
CODE = (Path(__file__), *sorted(Path(__file__).with_name("checks").glob("*.py")))


@cache
def _code_digest() -> str:
    """A digest of the code that turns a summary into findings (this module and `analysis.checks`)."""
    h = hashlib.sha256()
    for path in CODE:
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def findings_version(session, exp_id: int, spec_toml: str) -> str:
    """The version the findings of experiment `exp_id` computed now would be stored at (module doc)."""
    from analysis.stored import summary_version

    spec = hashlib.sha256(spec_toml.encode()).hexdigest()[:16]
    return f"{summary_version(session, exp_id, None)}/s{spec}/f{_code_digest()}"


def computed_findings(  # wide: the experiment, its parsed spec with why there is none, and the errors a caller read
    session, exp_id: int, name: str, parsed, why: str, errors: pd.DataFrame | None = None
) -> pd.DataFrame:
    """`verdicts_frame` of experiment `exp_id` (named `name`) computed from its rows: its generations read once, for
    the summary and the paired checks alike. `errors`: its `analysis.stored.prediction_error` where the caller has
    read it already."""
    from analysis.model_error import error_bounds
    from analysis.stored import prediction_error
    from analysis.summary import summary_frame
    from storage.summary import prompt_frame
    from storage.validation import prediction_pairs

    prompts, pairs = prompt_frame(session, exp_id), prediction_pairs(session, exp_id)
    return verdicts_frame(
        summary_frame(session, name, prompts=prompts, pairs=pairs),
        parsed,
        why,
        prompts,
        prediction_error(session, exp_id) if errors is None else errors,
        error_bounds(pairs),
    )


def stored_findings(session, exp_id: int, spec_toml: str) -> pd.DataFrame | None:
    """The findings the run stored for experiment `exp_id`, if stored at the version they would have now."""
    return read_frame(session, exp_id, FINDINGS, findings_version(session, exp_id, spec_toml))


def store_findings(session, exp_id: int, parse) -> bool:
    """Store the findings of experiment `exp_id` unless they are stored at their current version already; whether it
    wrote (committed). `parse`: its stored spec text to (Spec or None, why), `orchestrator.run.spec.parse_stored`
    (this layer reads no TOML), called only when the findings are due."""
    from storage.queries import experiment_info

    info = experiment_info(session, exp_id)
    toml = info.get("spec_toml") or ""
    version = findings_version(session, exp_id, toml)
    if stored_versions(session, exp_id).get(FINDINGS) == version:
        return False
    write_frame(session, exp_id, FINDINGS, version, computed_findings(session, exp_id, info["name"], *parse(toml)))
    session.commit()
    return True
