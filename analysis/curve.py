"""The learning curve: how a corpus draft's acceptance grows with the size of its instance base (or datastore).

Each strategy that reads a corpus is one point: its family (the
draft), the corpus's size in tokens (the trained base's own count, else the corpus's `max_tokens`), and its
acceptance at one k, pooled over prompts (accepted / drafted: the rate per drafted token; the summary's tables
show per-prompt means, which weigh each prompt alike and differ where prompts draft unequally), with a 95%
bootstrap interval over prompts. Per family and regime the slope of acceptance
against log10(tokens) is fitted by least squares, and its interval comes from the same bootstrap: every resample
draws the same prompts for every size (the sizes share the prompts), so the slope's interval is paired. The
crossing is the smallest size at which the family's acceptance beats a reference draft (the spec's 4-gram) on the
same prompts: the paired difference's interval lies above 0 (`analysis.stats.verdict`), or "none" up to the largest.

Pure pandas and numpy over `greenspec export --generations`'s rows (`generations_export_frame`) and the stored
spec: no database writes.

Example:
    >>> sizes = corpus_sizes(spec_toml, trained_tokens)   # {"base-1e5": (its draft, 1e5), "base-1e6": (..., 1e6)}
    >>> points = curve_points(gens, sizes, k=5)
    >>> slopes = curve_slopes(gens, sizes, k=5)   # per family and regime: slope per decade [lo, hi]
"""

from __future__ import annotations

import math
import tomllib
from collections import Counter
from collections.abc import Mapping

import numpy as np
import pandas as pd

from analysis import stats
from analysis.checks.check import Check
from analysis.checks.families import holm
from analysis.checks.rules import judge

Sizes = Mapping[str, tuple[str, float]]  # strategy -> (family, tokens)


def corpus_sizes(spec_toml: str, trained_tokens: Mapping[str, int]) -> dict[str, tuple[str, float]]:
    """strategy -> (family, tokens) for every strategy of a stored spec that reads a corpus: the tokens its base was
    trained on (`trained_tokens`, by corpus name), else the corpus's `max_tokens` (`label_max_tokens` for a distilled
    one); strategies without either are left out (their size is unknown). Where some text (a path) is cut into
    several corpora, the curve is over those texts alone (a base of a text used once, such as another domain's, is
    no point on it). The family is the draft's name, "<draft> on <path>" where two texts or more make curves; a
    distilled base's adds " (distilled)"."""
    spec = tomllib.loads(spec_toml)
    corpora = {c["name"]: c for c in spec.get("corpora", [])}
    texts = Counter(_text(c) for c in corpora.values())
    curves = {t for t, n in texts.items() if n > 1}  # texts cut at several sizes; none: every base is a point
    out = {}
    for s in spec.get("strategies", []):
        corpus = corpora.get(s.get("corpus") or "")
        if corpus is None or (curves and _text(corpus) not in curves):
            continue
        distilled = corpus.get("labels") == "verifier"
        cap = corpus.get("label_max_tokens", corpus.get("max_tokens")) if distilled else corpus.get("max_tokens")
        tokens = trained_tokens.get(corpus["name"]) or cap
        family = s["draft"]
        if len(curves) > 1:  # one curve per text: a base of another text is not a point on this one's
            family += f" on {_text(corpus).removeprefix('demo:')}"
        if tokens:
            out[s["name"]] = (f"{family}{DISTILLED}" if distilled else family, float(tokens))
    return out


def _text(corpus: dict) -> str:
    """The text a corpus entry cuts: its path, else its dataset."""
    return str(corpus.get("path") or corpus.get("dataset"))


DISTILLED = " (distilled)"  # a distilled base's family: the draft's name and this, a curve of its own


def distilled_vs_corpus(gens: pd.DataFrame, sizes: Sizes, k: int, regime: str, task: str | None = None) -> list[str]:
    """Per distilled base, lines comparing it on the same prompts with its draft's corpus bases of the same size and
    larger: the paired difference of acceptance with its 95% interval and verdict. Distillation buys more than more
    corpus where the distilled base beats a larger corpus base."""
    out = []
    for name, (family, tokens) in sorted(sizes.items(), key=lambda kv: kv[1][1]):
        if not family.endswith(DISTILLED):
            continue
        draft = family[: -len(DISTILLED)]
        others = sorted((n for n in sizes if sizes[n][0] == draft and sizes[n][1] >= tokens), key=lambda n: sizes[n][1])
        table = _prompt_table(gens, [name, *others], k, regime, task)
        present = set(table["accepted"].columns) if len(table) else set()
        for other in (o for o in others if o in present and name in present):
            value, boot, n = _acceptance(table, [name, other])
            if not n:
                continue
            lo, hi = stats.interval(boot[:, 0] - boot[:, 1], n)
            out.append(
                f"{name} ({_tokens(tokens)} labelled tokens) - {other} ({_tokens(sizes[other][1])} corpus tokens), "
                f"{regime}, k={k}: {value[0]:.3f} vs {value[1]:.3f}, difference {value[0] - value[1]:+.3f} "
                f"[{lo:+.3f}, {hi:+.3f}] ({stats.verdict(lo, hi, 0.0, '>')}), {n} prompts"
            )
    return out


def _prompt_table(gens: pd.DataFrame, strategies, k: int, regime: str, task: str | None) -> pd.DataFrame:
    """accepted and drafted per prompt (rows) and strategy (columns, a MultiIndex (figure, strategy))."""
    g = gens[gens["strategy"].isin(list(strategies)) & (gens["k"] == k) & (gens["regime"] == regime)]
    if task is not None:
        g = g[g["task"] == task]
    if "measure" in g:  # a prompt both replayed and timed made the same rounds: counted once, as its replay
        g = g.assign(_timed=g["measure"] != "replay").sort_values("_timed")
        g = g.drop_duplicates(["strategy", "task", "k", "regime", "prompt_index"])
    g = g.assign(prompt=g["task"].astype(str) + "#" + g["prompt_index"].astype(str))
    return g.pivot_table(index="prompt", columns="strategy", values=["accepted", "drafted"], aggfunc="sum")


def _acceptance(table: pd.DataFrame, names: list[str]):
    """(the acceptance of each strategy over every prompt all of them have, the bootstrap's (R, len(names)) of it)."""
    acc = table["accepted"][names].to_numpy(float)
    dra = table["drafted"][names].to_numpy(float)
    keep = np.isfinite(acc).all(axis=1) & np.isfinite(dra).all(axis=1)
    acc, dra = acc[keep], dra[keep]
    if not len(acc):
        return None, None, 0
    w = stats.weights(len(acc))
    with np.errstate(divide="ignore", invalid="ignore"):
        return acc.sum(0) / dra.sum(0), (w @ acc) / (w @ dra), len(acc)


def _slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of each row of y (..., n) against x (n,)."""
    xc = x - x.mean()
    return ((y - y.mean(axis=-1, keepdims=True)) * xc).sum(axis=-1) / (xc**2).sum()


def _curvature(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The quadratic coefficient of a least-squares parabola through each row of y (..., n) against x (n >= 3): per
    decade squared where x is log10 tokens; 0 where the points lie on a line."""
    return np.polyfit(x, np.asarray(y).T, 2)[0]


def _lack_of_fit(x: np.ndarray, value: np.ndarray, boot: np.ndarray, n: int) -> dict:
    """Whether a straight line in log tokens fits the sizes' acceptance: the parabola's curvature with its paired
    interval over prompts; "bends" where the interval excludes 0 (a slope is then an average over a curve, and no
    extrapolation of it holds), "line fits" where it holds 0, "untested" under 3 sizes."""
    if len(x) < 3:
        return dict(curvature=np.nan, curvature_lo=np.nan, curvature_hi=np.nan, fit="untested (2 sizes)")
    finite = np.isfinite(boot).all(axis=1)
    resampled = np.full(len(boot), np.nan)
    resampled[finite] = _curvature(x, boot[finite])
    lo, hi = stats.interval(resampled, n)
    eps = 1e-9  # a parabola through collinear points: a curvature of 1e-17, not a bend
    fit = "untested" if not (np.isfinite(lo) and np.isfinite(hi)) else "bends" if lo > eps or hi < -eps else "line fits"
    return dict(curvature=float(_curvature(x, value)), curvature_lo=lo, curvature_hi=hi, fit=fit)


def curve_points(gens: pd.DataFrame, sizes: Sizes, k: int, task: str | None = None) -> pd.DataFrame:
    """One row per strategy of `sizes` and regime at `k`: family, tokens, acceptance with its interval, prompts."""
    rows = []
    for regime in sorted(gens["regime"].dropna().unique()):
        table = _prompt_table(gens, sizes, k, regime, task)
        for name in sorted(set(sizes) & (set(table["accepted"].columns) if len(table) else set())):
            value, boot, n = _acceptance(table, [name])
            if n:
                lo, hi = stats.interval(boot[:, 0], n)
                family, tokens = sizes[name]
                rows.append(
                    dict(
                        family=family,
                        strategy=name,
                        tokens=tokens,
                        regime=regime,
                        acceptance=value[0],
                        acceptance_lo=lo,
                        acceptance_hi=hi,
                        n_prompts=n,
                    )
                )
    return (
        pd.DataFrame(rows).sort_values(["family", "regime", "tokens"]).reset_index(drop=True)
        if rows
        else pd.DataFrame()
    )


def curve_slopes(gens: pd.DataFrame, sizes: Sizes, k: int, task: str | None = None) -> pd.DataFrame:
    """Per family and regime with two sizes or more: acceptance gained per decade of tokens, with its paired 95%
    interval over prompts, the verdict of "acceptance grows with the base" (slope > 0; the curve's verdicts one family,
    Holm-corrected: `_holm`), and with three sizes or more whether a line fits them at all (`_lack_of_fit`)."""
    rows = []
    for regime in sorted(gens["regime"].dropna().unique()):
        table = _prompt_table(gens, sizes, k, regime, task)
        present = set(table["accepted"].columns) if len(table) else set()
        for family in sorted({f for f, _ in sizes.values()}):
            names = sorted((n for n in sizes if sizes[n][0] == family and n in present), key=lambda n: sizes[n][1])
            if len({sizes[n][1] for n in names}) < 2:
                continue
            value, boot, n = _acceptance(table, names)
            if not n:
                continue
            x = np.log10([sizes[name][1] for name in names])
            slope, boot_slopes = float(_slope(x, value)), _slope(x, boot)
            lo, hi = stats.interval(boot_slopes, n)
            rows.append(
                dict(
                    family=family,
                    regime=regime,
                    sizes=len(names),
                    slope_per_decade=slope,
                    slope_lo=lo,
                    slope_hi=hi,
                    n_prompts=n,
                    **_lack_of_fit(x, value, boot, n),
                )
            )
    return _holm(pd.DataFrame(rows))


GROWS = "acceptance grows with the base"  # the curve's family of verdicts: one per draft family and regime


def _holm(slopes: pd.DataFrame) -> pd.DataFrame:
    """The slopes' "grows" verdicts as one family, Holm-corrected (`analysis.checks.families`): each read off its
    interval against 0 (`rules.judge`: no verdict under 10 prompts), `before` its verdict at 95% alone."""
    if slopes.empty:
        return slopes
    checks = []
    for r in slopes.itertuples():
        j = judge(stats.Estimate(r.slope_per_decade, r.slope_lo, r.slope_hi, r.n_prompts), 0.0, ">")
        checks.append(Check(GROWS, r.family, r.regime, j.verdict, "", p=j.p, family=GROWS))
    corrected = holm(checks)
    return slopes.assign(
        verdict=[c.verdict for c in corrected],
        before=[c.before or c.verdict for c in corrected],
        correction=f"Holm over {len(checks)}" if len(checks) > 1 else "none (one verdict)",
    )


def crossing(
    gens: pd.DataFrame, sizes: Sizes, family: str, reference: str, k: int, regime: str, task: str | None = None
) -> str:
    """The smallest size at which `family` accepts more than the `reference` strategy on the same prompts (the paired
    difference's 95% interval above 0), as a line; or that it does not up to the largest size, with the gap there."""
    names = sorted((n for n in sizes if sizes[n][0] == family), key=lambda n: sizes[n][1])
    table = _prompt_table(gens, [*names, reference], k, regime, task)
    if not len(table) or reference not in table["accepted"].columns:
        return f"{family} vs {reference} ({regime}, k={k}): no common prompts"
    last = None
    for name in (n for n in names if n in table["accepted"].columns):
        value, boot, n = _acceptance(table, [name, reference])
        if not n:
            continue
        diff = boot[:, 0] - boot[:, 1]
        lo, hi = stats.interval(diff, n)
        last = (name, value[0] - value[1], lo, hi, n)
        if stats.verdict(lo, hi, 0.0, ">") == "holds":
            return (
                f"{family} clears {reference} from {_tokens(sizes[name][1])} tokens ({regime}, k={k}): "
                f"difference {value[0] - value[1]:+.3f} [{lo:+.3f}, {hi:+.3f}], {n} prompts"
            )
    if last is None:
        return f"{family} vs {reference} ({regime}, k={k}): no common prompts"
    name, d, lo, hi, n = last
    return (
        f"{family} does not clear {reference} up to {_tokens(sizes[name][1])} tokens ({regime}, k={k}): "
        f"difference there {d:+.3f} [{lo:+.3f}, {hi:+.3f}], {n} prompts"
    )


def _tokens(n: float) -> str:
    """10^5 style for a power of ten, else the count with separators."""
    e = math.log10(n) if n > 0 else 0
    return f"10^{round(e)}" if abs(e - round(e)) < 1e-9 else f"{int(n):,}"
