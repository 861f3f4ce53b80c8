"""A tiny trained verifier saved to disk, small real-text corpora and a spec writer for driver tests.

The verifier is a real Mistral-architecture model over the real Mistral tokenizer, trained for a few CPU
seconds on the same pydoc text the instance base is built from, so its greedy text varies and is partly
predictable: olifant and ngram drafts are accepted *and* rejected, and exact match can fail. (A random-weight
verifier emits one token repeated, which "repeat the first token" would reproduce exactly.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

SPEC = """
[experiment]
name = "{name}"
max_attempts = {attempts}
batch_size = 4
[verifier]
model = "{model}"
tokenizer = "mistral"
dtype = "float32"
device = "cpu"
threads = 1  # a tiny model: one torch thread is fastest, and the suite shares the cores
[[corpora]]
name = "pydoc"
path = "{corpus}"
[[tasks]]
name = "pydoc"
path = "{task}"
prompts = 2
prompt_words = 20
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "ngram"
draft = "ngram"
[[strategies]]
name = "olifant-pydoc"
draft = "olifant"
corpus = "pydoc"
[sweep]
k = {k}
regimes = ["uncached", "cached"]
max_new_tokens = {max_new}
warmup = false
[power]
sources = ["estimate"]
hz = 20
"""


MAX_NEW_TOKENS = 16

# 150 AdamW steps of 8 x 64 tokens, the loss over the ~3.6k token ids seen in training (+256 random others):
# ~17 s of one CPU. Enough to learn the text's layout and common words (loss ~10.4 -> ~5.6 nats).
VERIFIER_RECIPE = dict(
    hidden_size=64,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    intermediate_size=128,
    steps=150,
    batch_size=8,
    seq_len=64,
    lr=1e-2,
    warmup_steps=10,
    negatives=256,
    full_softmax_steps=0,
    frequent=0,
)


def _verifier_key(train_text: bytes) -> str:
    """What the tiny verifier's weights depend on: its recipe, its training text, the trainer's source and the
    library versions (training is seeded and runs on one thread, so the same key gives the same weights)."""
    import hashlib

    import torch
    import transformers

    import workers.models.demo as trainer
    import workers.models.tokenizer as tokenizer

    h = hashlib.sha256(repr(sorted(VERIFIER_RECIPE.items())).encode())
    sources = [Path(m.__file__).read_bytes() for m in (trainer, tokenizer)]
    for part in (train_text, *sources, torch.__version__, transformers.__version__):
        h.update(part if isinstance(part, bytes) else part.encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def tiny_verifier(text_files) -> Path:
    """A tiny Mistral (vocab 32000, 2 layers) trained on the corpus text, saved with save_pretrained; trained once per
    `_verifier_key` into the tests' own cache (TEST_CACHE, kept between runs like the converted models: the training
    costs 17-27 s of a core), by the first xdist worker that needs it (the others wait on a file lock and load it)."""
    import shutil

    import torch
    from filelock import FileLock

    from tests.conftest import TEST_CACHE
    from workers.models.demo import TinyLMSpec, token_streams, train_lm
    from workers.models.tokenizer import load_tokenizer

    root = Path(TEST_CACHE) / "tiny-verifier"
    root.mkdir(parents=True, exist_ok=True)
    key = _verifier_key(text_files[0].read_bytes())
    out, done = root / key, root / f"{key}.done"
    with FileLock(str(root / f"{key}.lock")):
        if not done.exists():
            tok = load_tokenizer("mistral")
            shutil.rmtree(out, ignore_errors=True)  # a training killed half-way
            out.mkdir()
            before = torch.get_num_threads()
            torch.set_num_threads(1)  # tiny matrices: one thread is fastest, and the cores are shared
            try:
                train_lm(TinyLMSpec(**VERIFIER_RECIPE), token_streams([text_files[0]], tok), out, tok)
            finally:
                torch.set_num_threads(before)
            done.touch()
    return out


@pytest.fixture(scope="session")
def text_files(tmp_path_factory) -> tuple[Path, Path]:
    """Train and task files from the standard library's pydoc topics (real technical English)."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    d = tmp_path_factory.mktemp("text")
    train, task = d / "train.txt", d / "task.txt"
    train.write_text("\n\n".join(topics[k] for k in keys[:40]))
    task.write_text("\n\n".join(" ".join(topics[k].split()) for k in keys[60:70]))
    return train, task


def spec_writer(folder: Path, tiny_verifier: Path, text_files: tuple[Path, Path]):
    """write(name=..., k=[2, 3], attempts=2, **replace) -> path of a spec over the tiny verifier, in `folder`."""

    def write(name: str = "t", k: list[int] | None = None, attempts: int = 2, **replace: str) -> Path:
        text = SPEC.format(
            name=name,
            attempts=attempts,
            model=tiny_verifier,
            corpus=text_files[0],
            task=text_files[1],
            k=k or [2, 3],
            max_new=MAX_NEW_TOKENS,
        )
        for old, new in replace.items():
            text = text.replace(old, new)
        p = folder / f"{name}.toml"
        p.write_text(text)
        return p

    return write


@pytest.fixture
def write_spec(tmp_path, tiny_verifier, text_files):
    """write_spec(name=..., k=[2, 3], attempts=2) -> path of a spec over the tiny verifier."""
    return spec_writer(tmp_path, tiny_verifier, text_files)


def ray_address() -> str:
    """The session Ray's address, for driver subprocesses (`greenspec --address`): joining it costs seconds where
    starting a Ray of their own costs tens of seconds on a loaded 2-core machine. Call with `ray_local` active."""
    import ray

    return ray.get_runtime_context().gcs_address


SMALL = {
    'regimes = ["uncached", "cached"]': 'regimes = ["cached"]',
    '[[strategies]]\nname = "ngram"\ndraft = "ngram"\n': "",
}  # plain and olifant, one regime: a quick grid


def small_spec(write_spec, k: list[int], **replace: str) -> Path:
    """The test spec cut down to what a test needs when the grid's size does not matter to it."""
    return write_spec(k=k, **SMALL, **replace)


def cli(*args: str) -> tuple[int, str, str]:
    """`greenspec ARGS` in this process (click's runner): (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from orchestrator.cli import main

    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.stdout, res.stderr
