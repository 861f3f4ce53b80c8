"""A grid's sweep and replay cells, streamed in the order `orchestrator.run.cells.expand` lists them.

Per task: strategy x prompt x k x regime (x temperature); a draft that proposes nothing once per prompt and regime
(k = 0). With `[sweep] replay`, every greedy cell of a replayable strategy is also a replay cell (CPU; it needs its
prompt's reference and the cost model's table), and only the first `timed_prompts` prompts are timed.

What depends only on a coordinate (strategy x task x k x regime x temperature) is worked out once per coordinate, as a
`Plan`: its cells' fields, options and needs, its key payloads cut around the prompt (`PromptKeys`), and how many
prompts it times (`[sweep] timed_prompts`, and the `timed_coordinates` sample, chosen over coordinates before any cell
is made). Per prompt only its key is hashed; `sweep_keys` yields the keys alone (what `greenspec validate` checks),
`sweep_cells` the cells, with their reference linked when given the reference keys.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.run.cell_keys import PROMPT, PromptKeys, prompt_json, sampling_identity, verifier_identity
from orchestrator.run.spec import Spec, StrategySection
from storage.cell_spec import CellParams, CellSpec
from workers.decoding.passes import width_band
from workers.drafts.registry import Requirement

COST_ROLE = "costmodel"  # the role under which a cell needs the experiment's round-cost table cell
AT_TIMING = "timing"  # `CellParams.stage` of the table measured again just before the timed cells
ALL = float("inf")  # a coordinate that times every prompt


def at_timing(c: CellSpec) -> bool:
    """Whether a cell measures the round-cost table again just before the timed cells (it waits for the replays)."""
    return c.kind == COST_ROLE and c.params.stage == AT_TIMING


@dataclass(frozen=True)
class TaskPrompts:
    """The prompts of one task, as loaded from its source (index = position among usable documents)."""

    task: str
    texts: tuple[str, ...]
    skipped_short: int = 0


@dataclass(frozen=True)
class Plan:
    """One coordinate of a task: what its cells share over the task's prompts."""

    coords: dict[str, Any]  # strategy, draft, task, corpus, k, regime, temperature: the cells' columns
    sweep: PromptKeys  # the timed sweep cells' keys
    replay: PromptKeys | None  # the replay cells' keys (greedy, replayable, `[sweep] replay`), or None: none
    timed: float  # the prompts below this index also get a timed sweep cell
    options: dict[str, Any]  # the draft's options (one dict, shared by the coordinate's cells)
    needs: dict[str, str]  # the sweep cells' needs
    replay_needs: dict[str, str]  # the replay cells' (the cost model's table too)
    sampling: dict[str, Any]  # a sampled coordinate's top_k and top_p ({} greedy)

    @property
    def coordinate(self) -> tuple:
        """What the timed sample is drawn over (`coordinate` of its cells)."""
        c = self.coords
        return (c["strategy"], c["task"], c["k"], c["regime"], c["temperature"] or 0.0)


def _timed(spec: Spec, s: StrategySection, temperature: float) -> float:
    """The prompts (a bound on their index) a coordinate times: `SweepSection.timed`, every prompt for a draft that
    cannot be replayed."""
    sw = spec.sweep
    if not s.replayable or ((not sw.replay or temperature > 0) and sw.timed_prompts is None):
        return ALL
    return sw.timed_prompts if not sw.replay or temperature > 0 else (sw.timed_prompts or 0)


def strategy_plans(
    spec: Spec, s: StrategySection, task: str, artifacts: dict[Requirement, CellSpec], costs: str | None
) -> list[Plan]:
    """A strategy's coordinates on a task, in the grid's order (k, then regime, then temperature)."""
    needs = {role: artifacts[req].key for role, req in s.options.requires().items()}
    corpus = next((r.corpus for r in s.options.requires().values()), None)
    draft = {"draft": s.draft, **s.options.identity(), **needs}
    options = s.options.model_dump()
    cell_needs = {**needs, COST_ROLE: costs} if s.auto and costs else needs
    replay_needs = {**cell_needs, COST_ROLE: costs}
    replayable, verifier, sw = s.replayable, verifier_identity(spec), spec.sweep
    out = []
    for k, regime, temperature in itertools.product(s.ks(sw.k), s.regimes_in(sw.regimes), sw.temperatures):
        sampling = sampling_identity(spec, temperature)
        ident = {
            "kind": "sweep",
            "verifier": verifier,
            "prompt": PROMPT,
            "k": k,
            "regime": regime,
            "max_new_tokens": sw.max_new_tokens,
            **draft,
            **sampling,
        }
        replay = sw.replay and temperature == 0 and replayable
        out.append(
            Plan(
                coords=dict(
                    strategy=s.name,
                    draft=s.draft,
                    task=task,
                    corpus=corpus,
                    k=k,
                    regime=regime,
                    temperature=temperature,
                ),
                sweep=PromptKeys(ident),
                replay=PromptKeys({**ident, "kind": "replay"}) if replay else None,
                timed=_timed(spec, s, temperature),
                options=options,
                needs=cell_needs,
                replay_needs=replay_needs,
                sampling={"top_k": sampling["top_k"], "top_p": sampling["top_p"]} if sampling else {},
            )
        )
    return out


def coordinate(c: CellSpec) -> tuple:
    """A sweep or replay cell's coordinate: what its prompts are sampled over."""
    return (c.strategy, c.task, c.k, c.regime, c.temperature or 0.0)


def stratified(seed: int, drafts: dict[tuple, str], n: int) -> list[tuple]:
    """Up to n coordinates, taking one from each (regime, width band) in turn, and within one the drafts in turn,
    each draft's coordinates in the order of a hash seeded with `seed`: every regime x band is timed before any is
    timed twice (the model's error is validated, and carried into intervals, per regime and band), and every stratum
    (regime, band, draft) before any twice where the bands hold as many drafts."""

    def rank(coord: tuple) -> str:
        return hashlib.sha256(json.dumps([seed, *coord]).encode()).hexdigest()

    def in_turn(lists) -> list[tuple]:
        return [c for layer in itertools.zip_longest(*lists) for c in layer if c is not None]

    bands: dict[tuple, dict[str, list[tuple]]] = {}
    for c in sorted(drafts, key=rank):
        bands.setdefault((c[3], width_band(c[0], c[2])), {}).setdefault(drafts[c], []).append(c)
    return in_turn(in_turn(by_draft.values()) for by_draft in bands.values())[: max(0, n)]


def timed_choice(spec: Spec, drafts: dict[tuple, str]) -> set[tuple]:
    """Of the replayed coordinates that have timed cells (coordinate -> draft), those `timed_coordinates` keeps
    timed: plain's always, the rest the `stratified` sample."""
    plain = {c for c in drafts if c[2] == 0}
    others = {c: d for c, d in drafts.items() if c not in plain}
    return plain | set(stratified(spec.experiment.seed, others, spec.sweep.timed_coordinates - len(plain)))


def grid_plans(
    spec: Spec, prompts: list[TaskPrompts], artifacts: dict[Requirement, CellSpec], costs: str | None
) -> list[tuple[TaskPrompts, list[list[Plan]]]]:
    """Every task's strategies' plans, with the replayed coordinates the timed sample leaves out timing no prompt."""
    tasks = [
        (p, [strategy_plans(spec, s, p.task, artifacts, costs) for s in spec.strategies if s.runs_on(p.task)])
        for p in prompts
    ]
    if not spec.sweep.replay or spec.sweep.timed_coordinates is None:
        return tasks
    replayed = [plan for p, strategies in tasks if p.texts for plans in strategies for plan in plans if plan.replay]
    drafts = {plan.coordinate: plan.coords["draft"] or "" for plan in replayed if plan.timed > 0}
    chosen = timed_choice(spec, drafts)
    left_out = {id(plan) for plan in replayed if plan.coordinate not in chosen}
    return [
        (p, [[replace(plan, timed=0) if id(plan) in left_out else plan for plan in plans] for plans in strategies])
        for p, strategies in tasks
    ]


def _walk(plans: list[tuple[TaskPrompts, list[list[Plan]]]]) -> Iterator[tuple[Plan, bool, int, str, bytes]]:
    """(plan, whether a replay cell, prompt index, prompt, its JSON) of every cell in the grid's order: per task,
    per strategy, per prompt, per coordinate its replay cell and then its timed one."""
    for p, strategies in plans:
        encoded = [prompt_json(t) for t in p.texts]
        for splans in strategies:
            for i, text in enumerate(p.texts):
                for plan in splans:
                    if plan.replay is not None:
                        yield plan, True, i, text, encoded[i]
                    if i < plan.timed:
                        yield plan, False, i, text, encoded[i]


def sweep_keys(plans: list[tuple[TaskPrompts, list[list[Plan]]]]) -> Iterator[str]:
    """The keys of every sweep and replay cell, in order, no cell made."""
    for plan, replay, _, _, encoded in _walk(plans):
        yield (plan.replay if replay else plan.sweep).key(encoded)


def sweep_cells(
    spec: Spec, plans: list[tuple[TaskPrompts, list[list[Plan]]]], refs: dict[tuple[str, str], str] | None = None
) -> Iterator[CellSpec]:
    """Every sweep and replay cell, in order; with `refs` ((task, prompt) -> reference key) each names its prompt's
    reference (`params.reference`, and a replay cell's needs)."""
    seed = spec.experiment.seed
    for plan, replay, i, text, encoded in _walk(plans):
        ref = refs.get((plan.coords["task"], text)) if refs is not None else None
        if replay:
            needs = {**plan.replay_needs, "reference": ref} if ref else plan.replay_needs
            params = CellParams(prompt=text, reference=ref, options=plan.options, needs=needs)
            yield CellSpec(key=plan.replay.key(encoded), kind="replay", prompt_index=i, **plan.coords, params=params)
            continue
        key = plan.sweep.key(encoded)
        params = CellParams(prompt=text, reference=ref, options=plan.options, needs=plan.needs)
        if plan.sampling:  # one reproducible stream per cell
            params = CellParams(
                prompt=text,
                reference=ref,
                options=plan.options,
                needs=plan.needs,
                **plan.sampling,
                seed=int(key[:8], 16) ^ seed,
            )
        yield CellSpec(key=key, kind="sweep", prompt_index=i, **plan.coords, params=params)
