"""workers.accelerator.runner.SweepRunner: typed jobs in, typed records out, drafts built through the registry."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tests.workers.power.power_trace import generation, replayed, trace
from workers.accelerator.runner import RunnerConfig, SweepRunner, fastest
from workers.contracts import Coordinates, JobOutcome, SweepJob
from workers.errors import DraftError

PROMPT = "The quick brown fox jumps over the lazy dog and the quick brown fox"


def sweep_job(key: str, kind: str = "sweep", prompt: str = PROMPT, **fields) -> SweepJob:
    """A job of the cell `key`: the coordinates' fields (strategy, draft, options, ...) go to its `Coordinates`."""
    sampling = {
        f: fields.pop(f) for f in ("temperature", "top_k", "top_p", "seed", "costs", "repeats", "pace") if f in fields
    }
    return SweepJob(Coordinates(key, **fields), kind, prompt, **sampling)


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(1)
    cfg = MistralConfig(
        vocab_size=32000,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    d = tmp_path_factory.mktemp("runner-model")
    MistralForCausalLM(cfg).eval().save_pretrained(d)
    r = SweepRunner(
        RunnerConfig(
            model=str(d),
            tokenizer="mistral",
            dtype="float32",
            device="cpu",
            max_new_tokens=12,
            warmup=False,
            power_sources=("estimate",),
            power_hz=50.0,
            threads=1,
        )
    )
    yield r
    r.close()


@pytest.fixture(scope="module")
def ibase_path(runner, tmp_path_factory):
    """An IGTree trained on the verifier's own greedy text, so olifant drafts get accepted."""
    from workers.igtree import IGTree

    ref = runner.run(sweep_job(key="r", kind="reference", prompt=PROMPT)).reference
    seq = list(ref.prompt_tokens) + list(ref.tokens)
    ctx = np.array([seq[i : i + 4] for i in range(len(seq) - 4)])
    path = tmp_path_factory.mktemp("ibase") / "t.igtree"
    IGTree.fit(ctx, np.array(seq[4:])).save(path)
    return str(path)


def test_reference_and_every_draft_give_the_reference_tokens(runner, ibase_path):
    ref = runner.run(sweep_job(key="r", kind="reference", prompt=PROMPT))
    assert isinstance(ref, JobOutcome) and ref.ok and len(ref.reference.tokens) == 12
    jobs = [
        sweep_job(key="p", kind="sweep", prompt=PROMPT, strategy="plain", draft="plain", regime="uncached"),
        sweep_job(
            key="n",
            kind="sweep",
            prompt=PROMPT,
            strategy="ng",
            draft="ngram",
            options={"n": 3, "unit": "token"},
            k=3,
            regime="cached",
        ),
        sweep_job(
            key="o",
            kind="sweep",
            prompt=PROMPT,
            strategy="ol",
            draft="olifant",
            options={"corpus": "c"},
            artifacts={"ibase": ibase_path},
            k=3,
            regime="uncached",
        ),
        sweep_job(
            key="s",
            kind="sweep",
            prompt=PROMPT,
            strategy="ol",
            draft="olifant",
            options={"corpus": "c"},
            artifacts={"ibase": ibase_path},
            k=3,
            regime="cached-standard",
        ),
    ]
    outs = runner.attach_energy([runner.run(j) for j in jobs])
    for o in outs:
        g = o.generation
        assert g.tokens == ref.reference.tokens, o.key
        assert g.energy is not None and g.energy.power_source.startswith("estimate")
    olifant = outs[2].generation
    assert olifant.accepted > 0 and olifant.steps < 12  # drafts from the verifier's own text are accepted


def test_drafts_stay_loaded_up_to_max_drafts_least_recent_released_first(runner):
    def job(strategy: str) -> SweepJob:
        return sweep_job(
            key=strategy,
            kind="sweep",
            prompt=PROMPT,
            strategy=strategy,
            draft="ngram",
            options={"n": 4},
            k=2,
            regime="uncached",
        )

    first = runner._draft_for(job("a"))
    assert runner._draft_for(job("b")) is not first and runner._draft_for(job("a")) is first  # a prompt's turns
    runner.cfg = replace(runner.cfg, max_drafts=2)
    try:
        b = runner._draft_for(job("b"))
        runner._draft_for(job("c"))  # a third: "a" (least recently used) is released, "b" stays
        assert runner._draft_for(job("b")) is b and runner._draft_for(job("a")) is not first
        runner.cfg = replace(runner.cfg, max_drafts=1)  # the strategy order: one draft at a time
        only = runner._draft_for(job("c"))
        assert len(runner._drafts) == 1 and runner._draft_for(job("a")) is not only and len(runner._drafts) == 1
    finally:
        runner.cfg = replace(runner.cfg, max_drafts=32)


def test_unknown_draft_or_option_is_a_draft_error(runner):
    with pytest.raises(DraftError, match="unknown draft 'medusa'"):
        runner.run(sweep_job(key="x", kind="sweep", prompt=PROMPT, strategy="m", draft="medusa", k=2, regime="cached"))
    with pytest.raises(DraftError, match="unknown key 'm'"):
        runner.run(
            sweep_job(
                key="y",
                kind="sweep",
                prompt=PROMPT,
                strategy="n2",
                draft="ngram",
                options={"m": 1},
                k=2,
                regime="cached",
            )
        )


def test_sampled_jobs_are_reproducible_by_seed_and_record_first_token_counts(runner, ibase_path):
    job = sweep_job(
        key="t",
        kind="sweep",
        prompt=PROMPT,
        strategy="ol",
        draft="olifant",
        options={"corpus": "c"},
        artifacts={"ibase": ibase_path},
        k=3,
        regime="cached",
        temperature=0.8,
        top_p=0.95,
        seed=11,
    )
    a, b = runner.run(job).generation, runner.run(job).generation
    assert a.tokens == b.tokens and len(a.tokens) == 12
    assert 0 <= a.first_accepted <= a.first_checked and a.first_checked > 0


def test_repeats_time_the_same_generation_and_keep_the_fastest(runner, ibase_path):
    jobs = [
        sweep_job(
            key="o",
            kind="sweep",
            prompt=PROMPT,
            strategy="ol",
            draft="olifant",
            options={"corpus": "c"},
            artifacts={"ibase": ibase_path},
            k=3,
            regime=regime,
            temperature=t,
            seed=5,
        )
        for regime in ("uncached", "cached")
        for t in (0.0, 0.8)
    ]
    once = [runner.run(j).generation for j in jobs]
    runner.cfg = replace(runner.cfg, repeats=3)
    try:
        thrice = [runner.run(j).generation for j in jobs]
    finally:
        runner.cfg = replace(runner.cfg, repeats=1)
    for a, b in zip(once, thrice):
        assert b.tokens == a.tokens and b.tokens_per_step == a.tokens_per_step and b.accepted == a.accepted
        assert len(a.wall_s_runs) == 1 and a.wall_s_runs[0] == a.wall_s
        assert len(b.wall_s_runs) == 3 and b.wall_s == min(b.wall_s_runs)
        # the energy window is the kept run's: its own length, not two runs' (the slack is for a loaded machine's
        # clock reads, time.time() for the window and perf_counter() for wall_s)
        assert b.ended_at - b.started_at == pytest.approx(b.wall_s, rel=0.5)


def test_a_paced_job_records_the_machines_pace_before_its_runs(runner):
    """A replayed run's timed greedy job times the machine's pace first (`pace`); the generation is the same."""
    job = sweep_job("p", strategy="ng", draft="ngram", k=3, regime="cached")
    plain, paced = runner.run(job).generation, runner.run(replace(job, pace=True)).generation
    assert plain.pace_s is None and paced.pace_s > 0
    assert paced.tokens == plain.tokens and paced.tokens_per_step == plain.tokens_per_step


def test_fastest_refuses_runs_that_made_different_work():
    def run(tokens, steps, wall):
        return SimpleNamespace(tokens=tokens, tokens_per_step=steps, wall_s=wall)

    same = [run([1, 2, 3], [2, 1], 0.3), run([1, 2, 3], [2, 1], 0.1), run([1, 2, 3], [2, 1], 0.2)]
    assert fastest(same) is same[1]
    with pytest.raises(RuntimeError, match="timed run 2 of strategy 'x' made other tokens or passes than run 1"):
        fastest([run([1, 2, 3], [2, 1], 0.3), run([1, 2, 4], [2, 1], 0.1)], "x")
    with pytest.raises(RuntimeError, match="timed run 3 of strategy 'x'"):
        fastest([run([1, 2, 3], [2, 1], 0.3), run([1, 2, 3], [2, 1], 0.2), run([1, 2, 3], [1, 1, 1], 0.1)], "x")


def test_runner_attaches_energy_from_its_own_sampler(runner):
    own = runner.sampler
    runner.sampler = replayed(trace())
    try:
        [out] = runner.attach_energy([JobOutcome(key="g", worker="w", generation=generation(2.25, 2.75, 4))])
    finally:
        runner.sampler = own
    assert out.generation.energy.energy_j == pytest.approx(20.0)  # 30 -> 50 W over 0.5 s
    assert out.generation.energy.j_per_100_tokens == pytest.approx(
        500.0
    ) and out.generation.energy.tokens_per_j == pytest.approx(0.2)


def test_labelling_takes_its_own_threads_and_gives_them_back(runner, monkeypatch, tmp_path):
    """A label job runs with `label_threads` torch threads (every core on CPU: it is the long batched passes) and
    the worker returns to its `threads` for the references and timed cells after it, on success or failure."""
    import torch

    import workers.training.labels as labels
    from workers.contracts import LabelJob
    from workers.corpora import TextSource

    seen = []

    def fake_label(verifier, tokenizer, job):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stop here")

    monkeypatch.setattr(labels, "label_corpus", fake_label)
    monkeypatch.setattr(runner, "cfg", replace(runner.cfg, label_threads=2))
    job = LabelJob(key="l" * 64, corpus=TextSource(name="c", path=str(tmp_path / "c.txt")), out_dir=str(tmp_path))
    torch.set_num_threads(1)
    with pytest.raises(RuntimeError, match="stop here"):
        runner._label(job)
    assert seen == [2] and torch.get_num_threads() == 1
