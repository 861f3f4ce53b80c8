"""The learning curve of a run (`analysis.curve`), as Markdown: acceptance and predicted speedup of every corpus draft
against its base's size in tokens, with 95% intervals over prompts; the slope per decade of tokens per draft family
and regime; where each corpus draft clears the spec's 4-gram on the same prompts, if it does; and what each base
cost to build (time, energy, peak memory of the training's process tree, file size).

Usage: python -m bench.learning_curve [DB_URL] [EXPERIMENT] [K] [TASK]
(default: sqlite:///study-code.db, study-code, 5, every task). A distilled base is a curve of its own, compared on the
same prompts with its draft's corpus bases of its size and larger, beside what its labels cost.

Nothing is measured here: every figure is read back from the run's database (`make study` fills it).
"""

from __future__ import annotations

import sys

import pandas as pd
from sqlalchemy import select

from analysis.curve import corpus_sizes, crossing, curve_points, curve_slopes, distilled_vs_corpus


def _fmt(value: float, lo: float, hi: float, digits: int = 3) -> str:
    return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _speedup(row) -> str:
    """A speedup with its interval, or with why it has none (a replayed speed whose regime and band no timed
    generation validated: `analysis.model_error`)."""
    if pd.notna(row["speedup_lo"]) and pd.notna(row["speedup_hi"]):
        return _fmt(row["speedup"], row["speedup_lo"], row["speedup_hi"], 2) + "x"
    return f"{row['speedup']:.2f}x (no interval: no validated model error here)"


def _labels(labels: pd.DataFrame) -> list[str]:
    """What the verifier's labels cost, as Markdown lines ([] without any)."""
    if not len(labels):
        return []
    out = ["", "What the verifier's labels cost (teacher-forced passes on the accelerator worker):", ""]
    out.append("| corpus | labelled tokens | agreement with the corpus | label s | tokens/s | energy J | device |")
    out.append("|---|---:|---:|---:|---:|---:|---|")
    for r in labels.itertuples():
        m = r.meta or {}
        energy = "" if pd.isna(r.energy_j) else f"{r.energy_j:,.0f}"
        n = m.get("n_labelled") or 0
        out.append(
            f"| {r.corpus} | {n:,} | {m.get('agreement', float('nan')):.3f} | {r.build_s:,.1f} | "
            f"{n / r.build_s if r.build_s else float('nan'):,.0f} | {energy} | {m.get('device', '')} |"
        )
    return out


def _costs(bases: pd.DataFrame) -> list[str]:
    """What each base cost to build, as Markdown lines ([] without bases)."""
    if not len(bases):
        return []
    out = [
        "",
        "What each base cost to build:",
        "",
        "| corpus | tokens | file MiB | build s | energy J | peak RSS MiB |",
    ]
    out.append("|---|---:|---:|---:|---:|---:|")
    for b in bases.sort_values("tokens").itertuples():
        rss = "" if pd.isna(b.peak_rss_bytes) else f"{b.peak_rss_bytes / 2**20:,.0f}"
        energy = "" if pd.isna(b.energy_j) else f"{b.energy_j:,.0f}"
        out.append(f"| {b.corpus} | {b.tokens:,} | {b.bytes / 2**20:,.1f} | {b.train_s:,.1f} | {energy} | {rss} |")
    return out


def _read(db, experiment: str) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(the experiment's instance bases with any distilled base's build beside them, its other artifacts, its spec)."""
    from storage.models import Artifact, Experiment, InstanceBase

    with db.Session() as s:
        exp = s.scalars(select(Experiment).where(Experiment.name == experiment)).one()
        bases = pd.DataFrame(
            s.execute(
                select(
                    InstanceBase.corpus,
                    InstanceBase.tokens,
                    InstanceBase.bytes,
                    InstanceBase.train_s,
                    InstanceBase.energy_j,
                    InstanceBase.peak_rss_bytes,
                ).where(InstanceBase.experiment_id == exp.id)
            ).all(),
            columns=["corpus", "tokens", "bytes", "train_s", "energy_j", "peak_rss_bytes"],
        )
        built = pd.DataFrame(
            s.execute(
                select(
                    Artifact.kind, Artifact.corpus, Artifact.bytes, Artifact.build_s, Artifact.energy_j, Artifact.meta
                ).where(Artifact.experiment_id == exp.id)
            ).all(),
            columns=["kind", "corpus", "bytes", "build_s", "energy_j", "meta"],
        )
        spec_toml = exp.spec_toml
    distilled = built[built["kind"] == "distill"]
    if len(distilled):  # a distilled base's build beside the corpus bases' (its peak memory is not measured)
        bases = pd.concat(
            [
                bases,
                pd.DataFrame(
                    dict(
                        corpus=distilled["corpus"],
                        tokens=[int(m.get("tokens", 0)) for m in distilled["meta"]],
                        bytes=distilled["bytes"],
                        train_s=distilled["build_s"],
                        energy_j=distilled["energy_j"],
                        peak_rss_bytes=float("nan"),
                    )
                ),
            ],
            ignore_index=True,
        )
    return bases, built, spec_toml


def report(url: str, experiment: str, k: int, task: str | None = None) -> str:
    import greenspec
    from analysis.checks.claims import session_4gram
    from orchestrator.run.spec import parse_spec

    db = greenspec.open_results(url)
    bases, built, spec_toml = _read(db, experiment)
    sizes = corpus_sizes(spec_toml, dict(zip(bases["corpus"], bases["tokens"])))
    reference = session_4gram(parse_spec(spec_toml))  # the paper's baseline: the 4-gram over the generation's text
    gens = db.generations(experiment)
    results = db.results(experiment)
    points = curve_points(gens, sizes, k, task)
    at_k = results[(results["k"] == k) & ((results["task"] == task) if task else True)]
    if "measure" in at_k:  # a coordinate both replayed (every prompt) and timed (its first): the replayed row
        at_k = at_k.assign(_timed=at_k["measure"] != "replay").sort_values("_timed")
    speed = at_k.drop_duplicates(["strategy", "regime"]).set_index(["strategy", "regime"])
    out = [
        f"Acceptance (pooled: accepted / drafted over the prompts) and predicted speedup (as in the study tables) against"
        f" the base's size (k = {k}; 95% intervals over prompts):",
        "",
    ]
    out.append("| draft | tokens | regime | acceptance | speedup | prompts |")
    out.append("|---|---:|---|---|---|---:|")
    for r in points.itertuples():
        sp = speed.loc[(r.strategy, r.regime)] if (r.strategy, r.regime) in speed.index else None
        speedup = "" if sp is None else _speedup(sp)
        acc = _fmt(r.acceptance, r.acceptance_lo, r.acceptance_hi)
        out.append(f"| {r.family} | {int(r.tokens):,} | {r.regime} | {acc} | {speedup} | {r.n_prompts} |")
    out += [
        "",
        "Pooled acceptance gained per decade of tokens (least squares over log10 tokens; paired bootstrap over "
        "prompts; \"grows?\" read off its interval, the table's verdicts one family Holm-corrected), and whether a line fits the sizes at all (a parabola's curvature per decade squared, its "
        "interval over the same resamples; a slope over a curve that bends is an average, extrapolated nowhere):",
        "",
    ]
    out.append("| draft | regime | sizes | slope per decade | grows? | curvature | line fits? | prompts |")
    out.append("|---|---|---:|---|---|---|---|---:|")
    for r in curve_slopes(gens, sizes, k, task).itertuples():
        slope = _fmt(r.slope_per_decade, r.slope_lo, r.slope_hi)
        bend = "" if pd.isna(r.curvature) else _fmt(r.curvature, r.curvature_lo, r.curvature_hi)
        row = f"| {r.family} | {r.regime} | {r.sizes} | {slope} | {r.verdict} | {bend} | {r.fit} | {r.n_prompts} |"
        out.append(row)
    if reference is not None:
        out += ["", f"Against `{reference}` (the 4-gram over the generation's own text) on the same prompts:", ""]
        for family in sorted({f for f, _ in sizes.values()}):
            for regime in sorted(gens["regime"].unique()):
                out.append(f"- {crossing(gens, sizes, family, reference, k, regime, task)}")
    versus = [
        line for regime in sorted(gens["regime"].unique()) for line in distilled_vs_corpus(gens, sizes, k, regime, task)
    ]
    if versus:
        out += [
            "",
            "Labelling against more corpus (the distilled base against its draft's corpus bases, same prompts):",
            "",
        ]
        out += [f"- {line}" for line in versus]
    out += _labels(built[built["kind"] == "label"])
    out += _costs(bases)
    return "\n".join(out)


def main(argv: list[str]) -> None:
    url = argv[0] if argv else "sqlite:///study-code.db"
    experiment = argv[1] if len(argv) > 1 else "study-code"
    k = int(argv[2]) if len(argv) > 2 else 5
    print(report(url, experiment, k, argv[3] if len(argv) > 3 else None))


if __name__ == "__main__":
    main(sys.argv[1:])
