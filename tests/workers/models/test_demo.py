"""Demo models: tiny variants trained in seconds on real demo text, cached, reused, retrained, loadable."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, MistralForCausalLM

from orchestrator.run.demo_corpora import chunk_text, pydoc_texts, shakespeare_texts
from workers.errors import CorpusError
from workers.models.demo import (
    DEMO_DRAFT,
    DEMO_VERIFIER,
    CandidateSampler,
    TinyLMSpec,
    cache_key,
    ensure_demo_models,
    lm_loss,
    lr_factor,
    mistral_config,
)
from workers.models.tokenizer import load_tokenizer, tokenizer_id

TINY_VERIFIER = TinyLMSpec(
    hidden_size=32,
    n_layers=2,
    n_heads=2,
    n_kv_heads=1,
    intermediate_size=64,
    steps=60,
    batch_size=2,
    seq_len=32,
    lr=1e-2,
    warmup_steps=5,
    negatives=256,
    full_softmax_steps=10,
)
# the draft trains with the sampled softmax (frequent tokens + the batch's + random others, log-q corrected)
TINY_DRAFT = dataclasses.replace(
    TINY_VERIFIER, hidden_size=24, n_layers=1, intermediate_size=48, tie_embeddings=True, frequent=300
)


@pytest.fixture(scope="module")
def train_files(tmp_path_factory):
    """Two small real-text training files: one play and a few pydoc topics (documents blank-line separated)."""
    root = tmp_path_factory.mktemp("demo-train")
    plays, topics = shakespeare_texts(), pydoc_texts()
    files = {
        "shakespeare": chunk_text(plays["macbeth"])[:40],
        "pydoc": [d for k in sorted(topics)[:8] for d in chunk_text(topics[k])],
    }
    paths = []
    for name, docs in files.items():
        path = root / f"{name}-train.txt"
        path.write_text("\n\n".join(docs) + "\n")
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def trained(train_files, tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-models")
    models = ensure_demo_models(train_files, verifier=TINY_VERIFIER, draft=TINY_DRAFT, root=root, threads=1)
    return root, models


def _weights(model_dir):
    return AutoModelForCausalLM.from_pretrained(model_dir).state_dict()


def test_saved_models_load_as_mistral_with_the_full_vocab(trained):
    _, models = trained
    for model_dir, spec in ((models.verifier_dir, TINY_VERIFIER), (models.draft_dir, TINY_DRAFT)):
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        assert isinstance(model, MistralForCausalLM)
        assert model.config.vocab_size == 32000 and model.config.hidden_size == spec.hidden_size
        assert model.config.num_hidden_layers == spec.n_layers
        assert model.config.tie_word_embeddings == spec.tie_embeddings
        out = model.generate(torch.tensor([[1, 415, 4419]]), max_new_tokens=5, do_sample=False, eos_token_id=None)
        assert out.shape == (1, 8)


def test_saved_tokenizer_is_the_mistral_tokenizer(trained):
    _, models = trained
    ref = load_tokenizer("mistral")
    for model_dir in (models.verifier_dir, models.draft_dir):
        tok = AutoTokenizer.from_pretrained(model_dir)
        assert tokenizer_id(tok) == tokenizer_id(ref)
        text = "Is this a dagger which I see before me?"
        assert tok(text).input_ids == ref(text).input_ids and tok(text).input_ids[0] == 1


def test_training_reduced_the_loss_and_reports_sizes(trained):
    _, models = trained
    for report, model_dir, spec in (
        (models.verifier_report, models.verifier_dir, TINY_VERIFIER),
        (models.draft_report, models.draft_dir, TINY_DRAFT),
    ):
        assert report.final_loss < report.first_loss - 0.5  # from ~ln(32000)=10.4 nats, both over all tokens
        assert report.steps == spec.steps and report.tokens_seen == spec.steps * spec.batch_size * spec.seq_len
        assert report.n_params == sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())
        assert report.train_s > 0 and report.cpu_s > 0
    assert models.verifier_report.n_params > models.draft_report.n_params
    assert not models.reused


def test_second_call_reuses_the_cache(trained, train_files):
    root, models = trained
    weights = models.verifier_dir / "model.safetensors"
    mtime = weights.stat().st_mtime_ns
    again = ensure_demo_models(train_files, verifier=TINY_VERIFIER, draft=TINY_DRAFT, root=root)
    assert again.reused and again.verifier_dir == models.verifier_dir
    assert again.verifier_report == models.verifier_report and again.draft_report == models.draft_report
    assert weights.stat().st_mtime_ns == mtime


def test_retrain_rebuilds_in_place_deterministically(trained, train_files):
    root, models = trained
    before = _weights(models.verifier_dir)
    mtime = (models.verifier_dir / "model.safetensors").stat().st_mtime_ns
    rebuilt = ensure_demo_models(
        train_files, retrain=True, verifier=TINY_VERIFIER, draft=TINY_DRAFT, root=root, threads=1
    )
    assert not rebuilt.reused and rebuilt.verifier_dir == models.verifier_dir
    assert (rebuilt.verifier_dir / "model.safetensors").stat().st_mtime_ns != mtime
    after = _weights(rebuilt.verifier_dir)
    assert all(torch.equal(before[k], after[k]) for k in before)  # same seed, same data: same weights
    assert rebuilt.verifier_report.final_loss == models.verifier_report.final_loss
    assert [p.name for p in root.iterdir()] == [models.verifier_dir.parent.name]  # no temp/old dirs left


def test_cache_key_follows_data_and_specs(train_files, tmp_path):
    tok_id = tokenizer_id(load_tokenizer("mistral"))
    key = cache_key(train_files, TINY_VERIFIER, TINY_DRAFT, tok_id)
    assert key == cache_key(train_files, TINY_VERIFIER, TINY_DRAFT, tok_id)
    assert key != cache_key(train_files, dataclasses.replace(TINY_VERIFIER, steps=61), TINY_DRAFT, tok_id)
    changed = tmp_path / "pydoc-train.txt"
    changed.write_text(train_files[1].read_text() + "\nOne more line.\n")
    assert key != cache_key([train_files[0], changed], TINY_VERIFIER, TINY_DRAFT, tok_id)


def test_missing_training_file_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="training file not found: .*nope.txt"):
        ensure_demo_models([tmp_path / "nope.txt"], verifier=TINY_VERIFIER, draft=TINY_DRAFT, root=tmp_path)


def test_demo_specs_make_the_verifier_costlier_than_the_draft():
    assert DEMO_VERIFIER.n_layers > DEMO_DRAFT.n_layers and DEMO_VERIFIER.hidden_size > DEMO_DRAFT.hidden_size
    assert DEMO_VERIFIER.seq_len >= 200  # prompt (~80 tokens) + 100 new tokens stay within trained positions


def test_lr_schedule_warms_up_then_decays_to_a_tenth():
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, 10, 100) == pytest.approx(1.0)
    assert lr_factor(10, 10, 100) == pytest.approx(1.0)
    assert lr_factor(100, 10, 100) == pytest.approx(0.1)


def test_loss_over_the_whole_vocab_equals_the_models_own_loss():
    tok = load_tokenizer("mistral")
    torch.manual_seed(0)
    model = MistralForCausalLM(mistral_config(TINY_VERIFIER, tok))
    batch = torch.randint(0, 32000, (2, 16))
    full = lm_loss(model, batch, None)
    assert torch.allclose(lm_loss(model, batch, torch.arange(32000)), full, atol=1e-5)
    seen = torch.unique(batch)
    assert lm_loss(model, batch, seen) < full  # fewer competitors for the same targets


def test_sampled_candidates_hold_the_batch_and_correct_only_the_rarely_scored_tokens():
    streams = [np.array([1, 5, 5, 5, 7, 7, 9] * 20), np.array([1, 11, 11, 12] * 20)]
    spec = dataclasses.replace(TINY_VERIFIER, batch_size=2, seq_len=4, frequent=3, negatives=4)
    sampler = CandidateSampler(streams, 100, spec)
    batch = torch.tensor([[1, 5, 9, 7], [1, 11, 12, 11]])
    vocab, log_q = sampler(batch)
    assert torch.equal(vocab, torch.sort(vocab).values) and len(torch.unique(vocab)) == len(vocab)
    assert set(batch.flatten().tolist()) <= set(vocab.tolist()) and len(vocab) <= 3 + 4 + batch.numel()
    frequent = {1, 5, 11}  # the 3 commonest tokens of the domain-balanced mix
    for token, lq in zip(vocab.tolist(), log_q.tolist()):
        assert (lq == 0.0) == (token in frequent)  # always scored: no correction; others: log q < 0
    unseen = [lq for token, lq in zip(vocab.tolist(), log_q.tolist()) if token > 12]
    assert all(lq == pytest.approx(np.log(4 / 97)) for lq in unseen)  # 4 negatives drawn from 100 - 3 frequent ids
    plain_vocab, plain_log_q = CandidateSampler(streams, 100, dataclasses.replace(spec, frequent=0))(batch)
    assert plain_log_q is None and {1, 5, 7, 9, 11, 12} <= set(plain_vocab.tolist())
