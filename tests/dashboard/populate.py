"""A small, realistic greenspec database for dashboard (and CLI) tests: `populate(url)`.

One experiment ("fixture"), tasks wikitext and pubmed, strategies plain / ngram / olifant-wikitext, k 3 and 5,
both regimes, 3 prompts each; references, an instance base, NVML power samples covering every generation,
and one failed sweep cell. Tokens are real Mistral tokenizer ids of the texts; step structure and timings are
synthetic but consistent (tokens = sum of accepted + 1 per step, wall = sum of step costs, energy = P * t).
"""

from __future__ import annotations

import hashlib
import random

from storage.db import open_db
from storage.models import Cell, Experiment, Generation, InstanceBase, PowerSample, Reference
from workers.models.tokenizer import load_tokenizer, tokenizer_id

EXPERIMENT = "fixture"
TASKS = ("wikitext", "pubmed")
STRATEGIES = {"plain": "plain", "ngram": "ngram", "olifant-wikitext": "olifant"}  # strategy -> draft
KS = (3, 5)
REGIMES = ("uncached", "cached")
T0_S = 1_750_000_000.0  # epoch seconds of the first generation
SAMPLE_EVERY_S = 0.1
POWER_W = {"plain": 180.0, "ngram": 190.0, "olifant": 200.0}
ACCEPT_P = {
    ("ngram", "wikitext"): 0.35,
    ("ngram", "pubmed"): 0.45,
    ("olifant", "wikitext"): 0.7,
    ("olifant", "pubmed"): 0.5,
}  # chance each draft token is accepted
STEP_S = {"uncached": 0.05, "cached": 0.03}  # one verifier pass

SPEC_TOML = """\
name = "fixture"
[verifier]
model = "demo-verifier"
tokenizer = "mistral"
[grid]
tasks = ["wikitext", "pubmed"]
strategies = ["plain", "ngram", "olifant-wikitext"]
k = [3, 5]
regimes = ["uncached", "cached"]
prompts = 3
max_new_tokens = 48
"""

PROMPTS = {  # task -> [(prompt, greedy continuation)]
    "wikitext": [
        (
            "The castle was built in the twelfth century by",
            " the Norman lords of the valley, who used it to guard the river crossing. During the civil war "
            "it was besieged twice and partly destroyed, and in the eighteenth century its stones were taken "
            "to build the village church.",
        ),
        (
            "The species is found throughout the northern",
            " forests of Europe and Asia, where it nests in old trees and feeds on insects and seeds. It is "
            "listed as least concern, although local populations have declined where old forests were "
            "cleared.",
        ),
        (
            "The album was released in 1994 and reached",
            " number three on the national chart. Critics praised its production and the singer's voice, and "
            "the second single became the band's best known song, played on radio for many years.",
        ),
    ],
    "pubmed": [
        (
            "Patients with type 2 diabetes were randomly assigned",
            " to receive either the study drug or placebo for 24 weeks. The primary outcome was the change in"
            " glycated haemoglobin from baseline. Secondary outcomes included body weight, fasting glucose "
            "and adverse events.",
        ),
        (
            "We conducted a retrospective cohort study of",
            " adults admitted to intensive care units with sepsis between 2010 and 2018. Mortality at 28 days"
            " was compared between patients who received early antibiotics and those who did not.",
        ),
        (
            "The aim of this study was to assess",
            " the prevalence of vitamin D deficiency among older adults living in care homes and its "
            "association with falls. Serum levels were measured in 312 residents and falls were recorded for "
            "one year.",
        ),
    ],
}


def _key(*parts) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _steps(rng: random.Random, n_tokens: int, k: int, p: float) -> list[int]:
    """Accepted draft tokens per verifier step until n_tokens are produced (each step adds accepted + 1)."""
    out, made = [], 0
    while made < n_tokens:
        a = 0
        while a < k and rng.random() < p:
            a += 1
        a = min(a, n_tokens - made - 1)
        out.append(a)
        made += a + 1
    return out


def _generation(rng, cell, exp, strategy, draft, task, prompt, k, regime, ref, t_s) -> Generation:
    """One consistent generation record starting at t_s."""
    tokens = list(ref.tokens)
    per_step = [0] * len(tokens) if draft == "plain" else _steps(rng, len(tokens), k, ACCEPT_P[(draft, task)])
    hist = [per_step.count(a) for a in range(k + 1)]
    drafted = 0 if draft == "plain" else k * len(per_step)
    accepted = sum(per_step)
    step_s = STEP_S[regime] * (1 + 0.04 * k)
    draft_s = 0.0 if draft == "plain" else len(per_step) * (0.002 if draft == "olifant" else 0.0005)
    wall_s = len(per_step) * step_s + draft_s
    power_w = POWER_W[draft] + rng.uniform(-5, 5)
    energy_j = power_w * wall_s
    text = ref.text if not (draft == "ngram" and prompt == 2) else ref.text.replace("the", "a", 1)
    return Generation(
        cell_id=cell.id,
        experiment_id=exp.id,
        strategy=strategy,
        draft=draft,
        task=task,
        prompt_index=prompt,
        k=k,
        regime=regime,
        n_prompt_tokens=len(ref.prompt_tokens),
        n_tokens=len(tokens),
        steps=len(per_step),
        drafted=drafted,
        accepted=accepted,
        acceptance=accepted / drafted if drafted else None,
        mal=accepted / len(per_step),
        accept_hist=hist,
        accepted_per_step=per_step,
        fastpath_rejects=0,
        wall_s=wall_s,
        draft_s=draft_s,
        verify_s=wall_s - draft_s,
        tokens_per_s=len(tokens) / wall_s,
        started_at=t_s,
        ended_at=t_s + wall_s,
        energy_j=energy_j,
        mean_power_w=power_w,
        j_per_100_tokens=energy_j / len(tokens) * 100,
        tokens_per_j=len(tokens) / energy_j,
        power_source="nvml",
        power_measured=True,
        rouge_l=1.0 if text == ref.text else 0.97,
        exact_match=text == ref.text,
        bridged=False,
        stopped="max_new_tokens",
        device="NVIDIA H200",
        tokens=tokens,
        text=text,
    )


def _samples(exp_id: int, gen: Generation, rng: random.Random) -> list[PowerSample]:
    """NVML samples every 0.1 s over the generation window (and a little idle around it)."""
    out, t = [], gen.started_at - 0.2
    while t <= gen.ended_at + 0.2:
        busy = gen.started_at <= t <= gen.ended_at
        power_w = (gen.mean_power_w if busy else 70.0) + rng.uniform(-3, 3)
        out.append(
            PowerSample(experiment_id=exp_id, t_s=t, source="nvml", power_w=power_w, energy_j=None, measured=True)
        )
        t += SAMPLE_EVERY_S
    return out


def _drop_energy(gen: Generation) -> None:
    """What a generation looks like where no power source covered it."""
    for column in ("energy_j", "mean_power_w", "j_per_100_tokens", "tokens_per_j", "power_source", "power_measured"):
        setattr(gen, column, None)


def _instance_base(s, exp: Experiment, tok_id: str) -> None:
    cell = Cell(experiment_id=exp.id, key=_key("train", "wikitext"), kind="train", state="done", corpus="wikitext")
    s.add(cell)
    s.flush()
    s.add(
        InstanceBase(
            cell_id=cell.id,
            experiment_id=exp.id,
            corpus="wikitext",
            path="/tmp/ibases/wikitext.igtree",
            sha256=_key("ibase"),
            backend="igtree",
            window=4,
            order="gain_ratio",
            tokenizer_id=tok_id,
            tokens=1_270_000,
            instances=1_269_996,
            nodes_before_prune=2_430_118,
            nodes_after_prune=121_850,
            bytes=3_912_448,
            train_s=41.7,
            energy_j=2_710.0,
            power_source="estimate",
            power_measured=False,
            partitions=3,
            memory_budget_bytes=10**9,
            peak_rss_bytes=930_000_000,
            cpu_s=38.2,
            energy_attribution="cpu-time share",
        )
    )


def _references(s, exp: Experiment, tok) -> dict[tuple[str, int], Reference]:
    refs = {}
    for task in TASKS:
        for i, (prompt, continuation) in enumerate(PROMPTS[task]):
            cell = Cell(
                experiment_id=exp.id,
                key=_key("ref", task, i),
                kind="reference",
                state="done",
                task=task,
                prompt_index=i,
            )
            s.add(cell)
            s.flush()
            tokens = tok(continuation, add_special_tokens=False).input_ids
            refs[task, i] = Reference(
                cell_id=cell.id,
                experiment_id=exp.id,
                task=task,
                prompt_index=i,
                prompt_text=prompt,
                prompt_tokens=tok(prompt).input_ids,
                tokens=tokens,
                text=tok.decode(tokens, skip_special_tokens=True),
                wall_s=1.2,
            )
            s.add(refs[task, i])
    return refs


def _sweep(s, exp: Experiment, refs, rng: random.Random, energy: bool) -> None:
    t_s = T0_S
    for regime in REGIMES:
        for task in TASKS:
            for strategy, draft in STRATEGIES.items():
                for k in (0,) if draft == "plain" else KS:
                    for i in range(len(PROMPTS[task])):
                        cell = Cell(
                            experiment_id=exp.id,
                            key=_key("sweep", strategy, task, k, regime, i),
                            kind="sweep",
                            state="done",
                            strategy=strategy,
                            draft=draft,
                            task=task,
                            prompt_index=i,
                            k=k,
                            regime=regime,
                            attempts=1,
                            worker="accelerator-0",
                        )
                        s.add(cell)
                        s.flush()
                        gen = _generation(rng, cell, exp, strategy, draft, task, i, k, regime, refs[task, i], t_s)
                        if energy:
                            s.add_all(_samples(exp.id, gen, rng))
                        else:
                            _drop_energy(gen)
                        s.add(gen)
                        t_s = gen.ended_at + 0.5


def _extra_cells(s, exp: Experiment, live: bool) -> None:
    s.add(
        Cell(
            experiment_id=exp.id,
            key=_key("failed"),
            kind="sweep",
            state="failed",
            strategy="olifant-wikitext",
            draft="olifant",
            task="pubmed",
            prompt_index=3,
            k=8,
            regime="cached",
            attempts=3,
            error="DraftError: /tmp/ibases/wikitext.igtree: sha256 differs from the instance base record",
        )
    )
    if live:
        for i, state in enumerate(("running", "pending", "pending")):
            s.add(
                Cell(
                    experiment_id=exp.id,
                    key=_key("live", i),
                    kind="sweep",
                    state=state,
                    strategy="ngram",
                    draft="ngram",
                    task="pubmed",
                    prompt_index=4 + i,
                    k=8,
                    regime="cached",
                )
            )


def spec_toml(verifier: str = "mistral") -> str:
    """The fixture's spec; with another `verifier` (e.g. the built-in `smollm2-135m`) it names that model and no
    tokenizer key, so the Texts page decodes with the verifier's own tokenizer."""
    if verifier == "mistral":
        return SPEC_TOML
    return SPEC_TOML.replace('model = "demo-verifier"\ntokenizer = "mistral"\n', f'model = "{verifier}"\n')


def populate(url: str, *, live: bool = False, energy: bool = True, seed: int = 0, verifier: str = "mistral") -> None:
    """Create the schema at `url` and fill it with the fixture experiment.

    `live` adds running and pending cells; `energy=False` stores no power at all (a machine without a source);
    `verifier` names the tokenizer whose ids the texts are stored as (and the spec's verifier, see `spec_toml`).
    """
    _, Session = open_db(url)
    tok = load_tokenizer(verifier)
    rng = random.Random(seed)
    with Session.begin() as s:
        exp = Experiment(
            name=EXPERIMENT,
            spec_path="examples/fixture.toml",
            spec_toml=spec_toml(verifier),
            spec_hash=_key(spec_toml(verifier)),
            device="NVIDIA H200",
            idle_power_w=70.0,
        )
        s.add(exp)
        s.flush()
        _instance_base(s, exp, tokenizer_id(tok))
        refs = _references(s, exp, tok)
        _sweep(s, exp, refs, rng, energy)
        _extra_cells(s, exp, live)
