"""Grid expansion: a spec becomes train, reference and sweep cells, each with a content-hash key.

A key hashes everything that determines a cell's result: the verifier (model, revision, tokenizer, dtype),
the prompt's text, the draft and its options, k, the regime, max_new_tokens, greenspec's version, and for
olifant cells the key of the train cell that builds their instance base (which itself hashes the corpus
source, tokenizer, window, backend and order). A distilled instance base (`labels = "verifier"`) is a
distill cell that needs a label cell; both hash the verifier too. Running a spec again adds nothing; adding k=12 adds only the
cells with k=12.

`expand` lists the cells; `iter_cells` makes them one at a time, `grid_keys` yields their keys alone (what `greenspec
validate` checks: a million-cell grid in seconds and a few bytes a cell); the sweep and replay cells are streamed by
`orchestrator.run.sweep_grid`, which does each coordinate's work once, and the keys are `orchestrator.run.cell_keys`'.
A `Grid` is what a run registers: the cells made again on each pass over it, never all held at once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.run.cell_keys import (  # noqa: F401 (re-exported: the keys' public names)
    GREENSPEC_VERSION,
    content_key,
    sampling_identity,
    source_digest,
    verifier_identity,
)
from orchestrator.run.spec import CorpusSection, Spec
from orchestrator.run.sweep_grid import (  # noqa: F401 (re-exported: the grid's public names)
    AT_TIMING,
    COST_ROLE,
    TaskPrompts,
    coordinate,
    grid_plans,
    stratified,
    sweep_cells,
    sweep_keys,
)
from storage.cell_spec import CellParams, CellSpec
from workers.drafts.registry import Requirement
from workers.training.artifacts import VERIFIER_KINDS, chain

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


def table_widths(spec: Spec) -> dict:
    """The widths and regimes the grid's rounds use: chains up to the largest k, trees of every budget."""
    ks = [k for s in spec.strategies if s.tree is None for k in s.ks(spec.sweep.k)]
    trees = sorted({s.tree for s in spec.strategies if s.tree is not None})
    regimes = sorted({r for s in spec.strategies for r in s.regimes_in(spec.sweep.regimes)})
    return {"max_n": max([1, *ks]), "tree_sizes": tuple(trees), "regimes": tuple(regimes)}


def cost_model_cell(spec: Spec, prompt: str | None, stage: str | None = None, turn: int = 0) -> CellSpec | None:
    """The accelerator cell that measures the verifier's round-cost table (`workers.decoding.costmodel`) on its device, when a
    replay's predictions or a k = "auto" strategy need it; it times rounds over a real prompt's tokens (which do
    not enter its key: the cost does not depend on which tokens). `stage = AT_TIMING`: one turn of the same table
    measured again among the timed cells (`timing_table_cells`)."""
    if not (spec.sweep.replay or any(s.auto for s in spec.strategies)):
        return None
    ident = {"kind": COST_ROLE, "verifier": verifier_identity(spec), "device": spec.verifier.device}
    ident |= {"table": "rounds", **table_widths(spec)}  # a grid with other widths or regimes measures its own
    if stage is not None:
        ident["stage"] = stage
    if turn:
        ident["turn"] = turn
    params = CellParams(prompt=prompt, stage=stage, turn=turn)
    return CellSpec(key=content_key(ident), kind=COST_ROLE, params=params)


def timing_table_cells(spec: Spec, prompt: str | None) -> list[CellSpec]:
    """The table measured again among the timed cells (`[sweep] table_at_timing`), when the run both replays and
    times greedy cells: `[sweep] table_turns` cells of one repeat each, which the scheduler spreads over the timed
    cells (`orchestrator.run.scheduler.spread_turns`); each turn's table is built from every turn so far and
    predicts the replays, on the machine's speed of the timings that validate them. [] otherwise."""
    sw = spec.sweep
    timed = sw.timed_prompts and sw.timed_coordinates != 0 and 0.0 in sw.temperatures
    if not (sw.replay and sw.table_at_timing and timed and any(s.replayable for s in spec.strategies)):
        return []
    return [c for t in range(sw.table_turns) if (c := cost_model_cell(spec, prompt, AT_TIMING, t)) is not None]


def _head(spec: Spec, prompts: list[TaskPrompts]) -> tuple[dict[Requirement, CellSpec], list[CellSpec], list[CellSpec]]:
    """The grid's cells before its sweep: the artifact cells, the cost model's (none, or the first table and the
    turns of the one at the timings) and the references."""
    artifacts = artifact_cells(spec)
    prompt = next((t for p in prompts for t in p.texts), None)
    first = cost_model_cell(spec, prompt)
    costs = [] if first is None else [first, *timing_table_cells(spec, prompt)]
    return artifacts, costs, [c for p in prompts for c in reference_cells(spec, p)]


def iter_cells(spec: Spec, prompts: list[TaskPrompts], linked: bool = False) -> Iterator[CellSpec]:
    """Every cell of the grid, made one at a time (`expand` lists them): artifact cells first, then the cost model,
    references, sweep and replay cells (`orchestrator.run.sweep_grid`). With `linked`, each sweep and replay cell
    names its prompt's reference cell, as `link_references` does to listed cells."""
    artifacts, costs, refs = _head(spec, prompts)
    yield from artifacts.values()
    yield from costs
    yield from refs
    links = {(c.task, c.params.prompt): c.key for c in refs} if linked else None
    yield from sweep_cells(spec, grid_plans(spec, prompts, artifacts, costs[0].key if costs else None), links)


def grid_keys(spec: Spec, prompts: list[TaskPrompts]) -> Iterator[str]:
    """The keys of every cell of the grid, in `expand`'s order, without making its sweep and replay cells."""
    artifacts, costs, refs = _head(spec, prompts)
    yield from (c.key for c in [*artifacts.values(), *costs, *refs])
    yield from sweep_keys(grid_plans(spec, prompts, artifacts, costs[0].key if costs else None))


def grid_digest(spec: Spec, prompts: list[TaskPrompts]) -> str:
    """sha256 over what a grid's cells are made from: the resolved spec (its JSON), each task's name and prompts, and
    greenspec's source (`source_digest`): equal digests make the same cells with the same keys and params."""
    h = hashlib.sha256(spec.model_dump_json().encode())
    for p in prompts:
        h.update(json.dumps([p.task, list(p.texts)]).encode())
    h.update(source_digest().encode())
    return h.hexdigest()


def expand(spec: Spec, prompts: list[TaskPrompts]) -> list[CellSpec]:
    """Every cell of the grid: artifact cells first, then the cost model, references, sweep and replay cells. With
    replay and `timed_coordinates = N`, the timed greedy cells of N coordinates only, plain's always, the rest a
    sample stratified over regime x pass-width band x draft (`stratified`), seeded with the experiment's seed (the
    same grid always samples the same ones); replayed cells, sampled ones (temperature > 0) and those of drafts that
    cannot be replayed all stay."""
    return list(iter_cells(spec, prompts))


def link_references(cells: list[CellSpec]) -> list[CellSpec]:
    """Each sweep and replay cell names the reference cell of its prompt (`params.reference`): results are matched by
    the prompt they were made for, never by position. A replay cell also needs it (it replays from its tokens).
    (A `Grid` makes them linked as it makes them: `iter_cells(..., linked=True)`.)"""
    refs = {(c.task, c.params.prompt): c.key for c in cells if c.kind == "reference"}
    out = []
    for c in cells:
        if c.kind in ("sweep", "replay"):
            ref = refs.get((c.task, c.params.prompt))
            needs = {**c.params.needs, "reference": ref} if c.kind == "replay" and ref else c.params.needs
            c = replace(c, params=replace(c.params, reference=ref, needs=needs))
        out.append(c)
    return out


@dataclass(frozen=True)
class Grid:
    """A prepared spec's cells, made again on each pass and never all held at once (a grid of 10^6 cells is about
    0.7 GB as objects): iterate it for the cells (references linked), `keys()` for their keys alone. `digest` hashes
    what the cells are made from: the resolved spec, every task's prompts and greenspec's own source (`grid_digest`);
    the experiment stores the digest of the grid it registered, so a resume of that very grid registers nothing
    again (`orchestrator.run.driver.register`)."""

    spec: Spec
    prompts: list[TaskPrompts]
    digest: str = ""

    def __iter__(self) -> Iterator[CellSpec]:
        return iter_cells(self.spec, self.prompts, linked=True)

    def keys(self) -> Iterator[str]:
        return grid_keys(self.spec, self.prompts)

    def __len__(self) -> int:
        return sum(1 for _ in self.keys())
