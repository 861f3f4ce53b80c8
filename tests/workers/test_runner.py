"""workers.runner.SweepRunner: typed jobs in, typed records out, drafts built through the registry."""

from __future__ import annotations

import numpy as np
import pytest

from workers.contracts import JobOutcome, SweepJob
from workers.errors import DraftError
from workers.runner import RunnerConfig, SweepRunner

PROMPT = "The quick brown fox jumps over the lazy dog and the quick brown fox"


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(1)
    cfg = MistralConfig(vocab_size=32000, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    d = tmp_path_factory.mktemp("runner-model")
    MistralForCausalLM(cfg).eval().save_pretrained(d)
    r = SweepRunner(RunnerConfig(model=str(d), tokenizer="mistral", dtype="float32", device="cpu",
                                 max_new_tokens=12, warmup=False, power_sources=("estimate",), power_hz=50.0,
                                 threads=1))
    yield r
    r.close()


@pytest.fixture(scope="module")
def ibase_path(runner, tmp_path_factory):
    """An IGTree trained on the verifier's own greedy text, so olifant drafts get accepted."""
    from workers.igtree import IGTree

    ref = runner.run(SweepJob(key="r", kind="reference", prompt=PROMPT)).reference
    seq = list(ref.prompt_tokens) + list(ref.tokens)
    ctx = np.array([seq[i:i + 4] for i in range(len(seq) - 4)])
    path = tmp_path_factory.mktemp("ibase") / "t.igtree"
    IGTree.fit(ctx, np.array(seq[4:])).save(path)
    return str(path)


def test_reference_and_every_draft_give_the_reference_tokens(runner, ibase_path):
    ref = runner.run(SweepJob(key="r", kind="reference", prompt=PROMPT))
    assert isinstance(ref, JobOutcome) and ref.ok and len(ref.reference.tokens) == 12
    jobs = [SweepJob(key="p", kind="sweep", prompt=PROMPT, strategy="plain", draft="plain", regime="uncached"),
            SweepJob(key="n", kind="sweep", prompt=PROMPT, strategy="ng", draft="ngram",
                     options={"n": 3, "unit": "token"}, k=3, regime="cached"),
            SweepJob(key="o", kind="sweep", prompt=PROMPT, strategy="ol", draft="olifant", options={"corpus": "c"},
                     artifacts={"ibase": ibase_path}, k=3, regime="uncached"),
            SweepJob(key="s", kind="sweep", prompt=PROMPT, strategy="ol", draft="olifant", options={"corpus": "c"},
                     artifacts={"ibase": ibase_path}, k=3, regime="cached-standard")]
    outs = runner.attach_energy([runner.run(j) for j in jobs])
    for o in outs:
        g = o.generation
        assert g.tokens == ref.reference.tokens, o.key
        assert g.energy is not None and g.energy.power_source.startswith("estimate")
    olifant = outs[2].generation
    assert olifant.accepted > 0 and olifant.steps < 12   # drafts from the verifier's own text are accepted


def test_draft_is_reused_while_the_strategy_stays(runner):
    job = SweepJob(key="n", kind="sweep", prompt=PROMPT, strategy="ng", draft="ngram", options={"n": 4}, k=2,
                   regime="uncached")
    first = runner._draft_for(job)
    assert runner._draft_for(job) is first
    assert runner._draft_for(SweepJob(key="m", kind="sweep", prompt=PROMPT, strategy="plain", draft="plain")) is not first


def test_unknown_draft_or_option_is_a_draft_error(runner):
    with pytest.raises(DraftError, match="unknown draft 'medusa'"):
        runner.run(SweepJob(key="x", kind="sweep", prompt=PROMPT, strategy="m", draft="medusa", k=2, regime="cached"))
    with pytest.raises(DraftError, match="unknown key 'm'"):
        runner.run(SweepJob(key="y", kind="sweep", prompt=PROMPT, strategy="n2", draft="ngram", options={"m": 1}, k=2,
                            regime="cached"))


def test_sampled_jobs_are_reproducible_by_seed_and_record_first_token_counts(runner, ibase_path):
    job = SweepJob(key="t", kind="sweep", prompt=PROMPT, strategy="ol", draft="olifant", options={"corpus": "c"},
                   artifacts={"ibase": ibase_path}, k=3, regime="cached", temperature=0.8, top_p=0.95, seed=11)
    a, b = runner.run(job).generation, runner.run(job).generation
    assert a.tokens == b.tokens and len(a.tokens) == 12
    assert 0 <= a.first_accepted <= a.first_checked and a.first_checked > 0
