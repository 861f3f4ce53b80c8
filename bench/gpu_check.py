"""`bench/gpu.sh` (`make gpu`): an end-to-end check on a CUDA GPU in a few minutes, with a short report.

Offline by construction (a GPU machine may reach nothing): the verifier and the neural draft are random-weight
Mistral models built here with transformers (the real Mistral tokenizer from mistral-common), the texts come
from the standard library's `pydoc_data`. The check runs `greenspec run` on a small spec (plain, ngram, olifant
and neural drafts; k 3 and 5; uncached and cached regimes) on the GPU in
fp32 with NVML power sampling, then verifies: every generation ran on cuda, equals the plain greedy reference
token for token, and carries NVML-measured energy; the cached regime is faster than the uncached one for plain
decoding. It prints throughput, J/100 tokens and draft latency per strategy and exits non-zero on a failed check.

Random weights give little acceptance: this checks the machinery on real hardware, not the paper's speedups.

Usage: python -m bench.gpu_check [--workdir DIR] [--device cuda] [--power nvml] [--layers 8] [--hidden 512]
(`--device cpu --power estimate` dry-runs the same path on a machine without a GPU.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """
[experiment]
name = "gpu-check"
artifacts = "{work}/artifacts"
[verifier]
model = "{verifier}"
tokenizer = "mistral"
dtype = "float32"
device = "{device}"
[[corpora]]
name = "pydoc"
path = "{work}/train.txt"
[[tasks]]
name = "pydoc"
path = "{work}/task.txt"
prompts = {prompts}
prompt_words = 50
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
[[strategies]]
name = "neural"
draft = "neural"
model = "{draft}"
tokenizer = "mistral"
[sweep]
k = [3, 5]
regimes = ["uncached", "cached"]
max_new_tokens = 64
[power]
sources = ["{power}"]
hz = 20
"""


def build_model(out: Path, layers: int, hidden: int) -> Path:
    """A random-weight Mistral (vocab 32000) saved with save_pretrained."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(
        vocab_size=32000,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=1024,
    )
    MistralForCausalLM(cfg).eval().save_pretrained(out)
    return out


def write_texts(work: Path) -> None:
    """Training text and prompt documents from the standard library's pydoc topics (offline English)."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    (work / "train.txt").write_text("\n\n".join(topics[k] for k in keys[:60]))
    (work / "task.txt").write_text("\n\n".join(" ".join(topics[k].split()) for k in keys[60:]))


def greenspec(*args: str) -> subprocess.CompletedProcess:
    """Run the CLI, echoing its command; raise with its stderr on failure."""
    cmd = [sys.executable, "-m", "orchestrator.cli", *args]
    print("$ greenspec " + " ".join(args), file=sys.stderr, flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise SystemExit(f"gpu check: `greenspec {' '.join(args)}` failed:\n{res.stderr[-3000:]}")
    return res


def checks(db: str, device: str, power: str) -> tuple[list[str], list[str]]:
    """(report lines, failed checks) over the stored generations and references."""
    import pandas as pd

    from analysis.summary import summary_frame
    from storage.db import open_db
    from storage.queries import generations_frame

    _, Session = open_db(db, migrate=False)
    with Session() as s:
        gens = generations_frame(s)
        summary = summary_frame(s, "gpu-check")
    failed = []
    if gens.empty:
        return [], ["no generations stored"]
    if not gens["device"].astype(str).str.startswith(device).all():
        failed.append(f"generations not all on {device}: {sorted(gens['device'].astype(str).unique())}")
    if not (gens["exact_match"] == 1).all():
        failed.append(f"{int((gens['exact_match'] != 1).sum())} generations differ from plain greedy")
    if power != "estimate":
        if not (gens["power_source"].astype(str).str.contains(power) & gens["power_measured"].astype(bool)).all():
            failed.append(f"energy not all measured by {power}: {sorted(gens['power_source'].astype(str).unique())}")
        if not (gens["energy_j"] > 0).all():
            failed.append("some generations have no positive energy")
    plain = summary[summary["strategy"] == "plain"].set_index("regime")["tokens_per_s"]
    if {"cached", "uncached"} <= set(plain.index) and not plain["cached"] > plain["uncached"]:
        failed.append(f"cached plain ({plain['cached']:.1f} tok/s) not faster than uncached ({plain['uncached']:.1f})")
    cols = ["strategy", "k", "regime", "tokens_per_s", "speedup", "acceptance", "j_per_100_tokens", "mean_power_w"]
    lines = [pd.DataFrame(summary[cols]).to_markdown(index=False, floatfmt=".3g")]
    return lines, failed


def gpu_name(device: str) -> str:
    """The accelerator's name as torch reports it."""
    import torch

    return torch.cuda.get_device_name(0) if device == "cuda" else "CPU (dry run)"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="bench/gpu.sh")
    p.add_argument("--workdir", default=None)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--power", default="nvml", choices=["nvml", "estimate"])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--prompts", type=int, default=4)
    a = p.parse_args(argv)
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        print(
            f"gpu check: torch {torch.__version__} sees no CUDA device (a CPU wheel? install a CUDA build of "
            "torch); `--device cpu --power estimate` dry-runs the same path",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="greenspec-gpu-"))
    work.mkdir(parents=True, exist_ok=True)
    write_texts(work)
    verifier = build_model(work / "verifier", a.layers, a.hidden)
    draft = build_model(work / "draft", max(1, a.layers // 4), max(64, a.hidden // 4))
    spec = work / "gpu.toml"
    spec.write_text(
        SPEC.format(work=work, verifier=verifier, draft=draft, device=a.device, power=a.power, prompts=a.prompts)
    )
    db = f"sqlite:///{work / 'gpu.db'}"
    greenspec("--db", db, "run", str(spec))
    latency = greenspec("--db", db, "latency", str(spec), "--prompts", "4", "--repeats", "5").stdout
    lines, failed = checks(db, a.device, a.power)
    print(
        f"# greenspec GPU check: {gpu_name(a.device)}, torch {torch.__version__}, "
        f"{time.perf_counter() - t0:.0f} s end to end\n"
    )
    print(
        f"verifier: random Mistral, {a.layers} layers x {a.hidden} hidden, fp32; power: {a.power}; "
        f"{a.prompts} prompts, 64 new tokens; work dir {work}\n"
    )
    print("\n".join(lines) + "\n\ndraft latency (no verifier):\n\n" + latency)
    print("checks: " + ("all passed" if not failed else "FAILED\n- " + "\n- ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
