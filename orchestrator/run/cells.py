"""Grid expansion: a spec becomes train, reference and sweep cells, each with a content-hash key.

A key hashes everything that determines a cell's result: the verifier (model, revision, tokenizer, dtype),
the prompt's text, the draft and its options, k, the regime, max_new_tokens, greenspec's version, and for
olifant cells the key of the train cell that builds their instance base (which itself hashes the corpus
source, tokenizer, window, backend and order). A distilled instance base (`labels = "verifier"`) is a
distill cell that needs a label cell; both hash the verifier too. Running a spec again adds nothing; adding k=12 adds only the
cells with k=12.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from orchestrator.run.spec import CorpusSection, Spec, StrategySection
from storage.cell_spec import CellParams, CellSpec
from workers.decoding.passes import width_band
from workers.drafts.registry import Requirement
from workers.training.artifacts import VERIFIER_KINDS, chain

try:
    GREENSPEC_VERSION = version("greenspec")
except PackageNotFoundError:  # running from a source tree without installing
    GREENSPEC_VERSION = "0+unknown"


@dataclass(frozen=True)
class TaskPrompts:
    """The prompts of one task, as loaded from its source (index = position among usable documents)."""

    task: str
    texts: tuple[str, ...]
    skipped_short: int = 0


def content_key(payload: dict[str, Any]) -> str:
    """sha256 over canonical JSON of the values that determine a result, plus greenspec's version."""
    blob = json.dumps({"greenspec": GREENSPEC_VERSION, **payload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def verifier_identity(spec: Spec) -> dict[str, Any]:
    """The verifier fields that change its outputs."""
    v = spec.verifier
    return {"model": v.model, "revision": v.revision, "tokenizer": v.tokenizer or v.model, "dtype": v.dtype}


# Corpus keys that change how an artifact is built, not what it holds: kept out of the key.
NOT_IN_KEY = {"name", "shards", "memory_gb"}
LABEL_KEYS = ("labels", "label_max_tokens", "label_chunk_tokens", "label_overlap_tokens")


def corpus_identity(corpus: CorpusSection) -> dict[str, Any]:
    """The corpus fields that determine what is built from it (label keys only for a distilled corpus)."""
    ident = corpus.model_dump(exclude=NOT_IN_KEY | ({"encoding"} if corpus.encoding is None else set()))
    if not corpus.distilled:  # corpus-trained instance bases keep the keys they had before labels existed
        for key in LABEL_KEYS:
            ident.pop(key, None)
    return ident


def corpus_cell(
    spec: Spec, corpus: CorpusSection, kind: str = "train", needs: dict[str, str] | None = None
) -> CellSpec:
    """The cell that builds a `kind` artifact (an instance base: "train") from `corpus` with the verifier's tokenizer.

    `needs` (role -> artifact cell key) names the artifacts this build reads; a label or distill cell also
    depends on the verifier (its labels are the verifier's tokens), so the verifier enters its key.
    """
    tokenizer = spec.verifier.tokenizer or spec.verifier.model
    payload = {"kind": kind, "corpus": corpus_identity(corpus), "tokenizer": tokenizer}
    if kind in VERIFIER_KINDS:
        payload |= {"verifier": verifier_identity(spec), "needs": needs or {}}
    params = CellParams(corpus=corpus.model_dump(), tokenizer=tokenizer, needs=needs or {})
    return CellSpec(key=content_key(payload), kind=kind, corpus=corpus.name, params=params)


def reference_cells(spec: Spec, prompts: TaskPrompts) -> list[CellSpec]:
    """One independent plain-greedy reference per task x prompt."""
    out = []
    for i, text in enumerate(prompts.texts):
        ident = {
            "kind": "reference",
            "verifier": verifier_identity(spec),
            "prompt": text,
            "max_new_tokens": spec.sweep.max_new_tokens,
        }
        out.append(
            CellSpec(
                key=content_key(ident),
                kind="reference",
                task=prompts.task,
                prompt_index=i,
                params=CellParams(prompt=text),
            )
        )
    return out


def artifact_cells(spec: Spec) -> dict[Requirement, CellSpec]:
    """The cell that builds each artifact the strategies require, and the cells of what it is built from (for a
    distilled instance base, its label cell under `Requirement("labels", corpus)`), by the artifact registry."""
    out: dict[Requirement, CellSpec] = {}
    for req in spec.requirements():
        corpus = spec.corpus(req.corpus)
        for kind in chain(req.artifact, corpus.distilled):
            needs = {need: out[Requirement(need, req.corpus)].key for need in kind.reads}
            out.setdefault(Requirement(kind.provides, req.corpus), corpus_cell(spec, corpus, kind.cell_kind, needs))
    return out


COST_ROLE = "costmodel"  # the role under which a cell needs the experiment's round-cost table cell


def table_widths(spec: Spec) -> dict:
    """The widths and regimes the grid's rounds use: chains up to the largest k, trees of every budget."""
    ks = [k for s in spec.strategies if s.tree is None for k in s.ks(spec.sweep.k)]
    trees = sorted({s.tree for s in spec.strategies if s.tree is not None})
    regimes = sorted({r for s in spec.strategies for r in s.regimes_in(spec.sweep.regimes)})
    return {"max_n": max([1, *ks]), "tree_sizes": tuple(trees), "regimes": tuple(regimes)}


def cost_model_cell(spec: Spec, prompt: str | None) -> CellSpec | None:
    """The accelerator cell that measures the verifier's round-cost table (`workers.costmodel`) on its device, when a
    replay's predictions or a k = "auto" strategy need it; it times rounds over a real prompt's tokens (which do
    not enter its key: the cost does not depend on which tokens)."""
    if not (spec.sweep.replay or any(s.auto for s in spec.strategies)):
        return None
    ident = {"kind": COST_ROLE, "verifier": verifier_identity(spec), "device": spec.verifier.device}
    ident |= {"table": "rounds", **table_widths(spec)}  # a grid with other widths or regimes measures its own
    return CellSpec(key=content_key(ident), kind=COST_ROLE, params=CellParams(prompt=prompt))


def sweep_cells(
    spec: Spec, prompts: TaskPrompts, artifacts: dict[Requirement, CellSpec], costs: str | None = None
) -> list[CellSpec]:
    """Strategy x prompt x k x regime for one task; a draft that proposes nothing once per prompt and regime (k = 0).

    With `[sweep] replay`, every greedy cell of a replayable strategy is also a replay cell (CPU; it needs its
    prompt's reference and the cost model `costs`), and only the first `timed_prompts` prompts are timed."""
    out = []
    for s in (s for s in spec.strategies if s.runs_on(prompts.task)):
        needs = {role: artifacts[req].key for role, req in s.options.requires().items()}
        corpus = next((r.corpus for r in s.options.requires().values()), None)
        draft = {"draft": s.draft, **s.options.identity(), **needs}
        for i, text in enumerate(prompts.texts):
            for k, regime, temperature in itertools.product(
                s.ks(spec.sweep.k), s.regimes_in(spec.sweep.regimes), spec.sweep.temperatures
            ):
                coords = dict(
                    strategy=s.name,
                    draft=s.draft,
                    task=prompts.task,
                    corpus=corpus,
                    prompt_index=i,
                    k=k,
                    regime=regime,
                    temperature=temperature,
                )
                out += _coordinate_cells(spec, s, text, coords, draft, needs, costs)
    return out


def _coordinate_cells(
    spec: Spec,
    s: StrategySection,
    text: str,
    coords: dict[str, Any],
    draft: dict[str, Any],
    needs: dict[str, str],
    costs: str | None,
) -> list[CellSpec]:
    """One coordinate's cells for one prompt: its replay cell (greedy, replayable, `[sweep] replay`), then its timed
    sweep cell unless replay alone covers this prompt."""
    temperature = coords["temperature"]
    sampling = sampling_identity(spec, temperature)
    ident = {
        "kind": "sweep",
        "verifier": verifier_identity(spec),
        "prompt": text,
        "k": coords["k"],
        "regime": coords["regime"],
        "max_new_tokens": spec.sweep.max_new_tokens,
        **draft,
        **sampling,
    }
    key = content_key(ident)
    cell_needs = {**needs, COST_ROLE: costs} if s.auto and costs else needs
    params = CellParams(prompt=text, options=s.options.model_dump(), needs=cell_needs)
    if sampling:  # one reproducible stream per cell
        params = replace(
            params, top_k=sampling["top_k"], top_p=sampling["top_p"], seed=int(key[:8], 16) ^ spec.experiment.seed
        )
    out = []
    if spec.sweep.replay and temperature == 0 and s.replayable:
        replay_params = replace(params, needs={**cell_needs, COST_ROLE: costs})
        out.append(
            CellSpec(key=content_key({**ident, "kind": "replay"}), kind="replay", **coords, params=replay_params)
        )
    if spec.sweep.timed(coords["prompt_index"], temperature) or not s.replayable:
        out.append(CellSpec(key=key, kind="sweep", **coords, params=params))
    return out


def sampling_identity(spec: Spec, temperature: float) -> dict[str, Any]:
    """What sampling adds to a cell's key: nothing at temperature 0 (greedy keys stay as they were)."""
    if temperature == 0:
        return {}
    sw = spec.sweep
    return {"temperature": temperature, "top_k": sw.top_k, "top_p": sw.top_p, "seed": spec.experiment.seed}


def expand(spec: Spec, prompts: list[TaskPrompts]) -> list[CellSpec]:
    """Every cell of the grid: artifact cells first, then the cost model, references, sweep and replay cells."""
    artifacts = artifact_cells(spec)
    costs = cost_model_cell(spec, next((t for p in prompts for t in p.texts), None))
    refs = [c for p in prompts for c in reference_cells(spec, p)]
    sweeps = [c for p in prompts for c in sweep_cells(spec, p, artifacts, costs.key if costs else None)]
    return list(artifacts.values()) + ([costs] if costs else []) + refs + timed_sample(spec, sweeps)


def coordinate(c: CellSpec) -> tuple:
    """A sweep or replay cell's coordinate: what its prompts are sampled over."""
    return (c.strategy, c.task, c.k, c.regime, c.temperature or 0.0)


def timed_sample(spec: Spec, cells: list[CellSpec]) -> list[CellSpec]:
    """With replay and `timed_coordinates = N`: the timed greedy cells of N coordinates only, plain's always, the
    rest a sample stratified over regime x pass-width band x draft (`stratified`), seeded with the experiment's seed
    (the same grid always samples the same ones); replayed cells, sampled ones (temperature > 0) and those of drafts
    that cannot be replayed all stay."""
    n = spec.sweep.timed_coordinates
    if not spec.sweep.replay or n is None:
        return cells
    replayed = {coordinate(c) for c in cells if c.kind == "replay"}
    drafts = {coordinate(c): c.draft or "" for c in cells if c.kind == "sweep" and coordinate(c) in replayed}
    plain = {c for c in drafts if c[2] == 0}
    others = {c: d for c, d in drafts.items() if c not in plain}
    chosen = plain | set(stratified(spec.experiment.seed, others, n - len(plain)))
    return [c for c in cells if c.kind != "sweep" or coordinate(c) not in replayed or coordinate(c) in chosen]


def stratified(seed: int, drafts: dict[tuple, str], n: int) -> list[tuple]:
    """Up to n coordinates, taking one from each stratum (regime, width band, draft) in turn, each stratum's in the
    order of a hash seeded with `seed`: every stratum is timed before any is timed twice."""

    def rank(coord: tuple) -> str:
        return hashlib.sha256(json.dumps([seed, *coord]).encode()).hexdigest()

    strata: dict[tuple, list[tuple]] = {}
    for c in sorted(drafts, key=rank):
        strata.setdefault((c[3], width_band(c[0], c[2]), drafts[c]), []).append(c)
    rounds = itertools.zip_longest(*strata.values())
    return [c for layer in rounds for c in layer if c is not None][: max(0, n)]
