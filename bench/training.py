"""Benchmark: training an instance base at 10^6..10^8 tokens, in memory and out of core, over 1 and 2 Ray workers.

No corpus that large ships with greenspec, so the token files are *synthetic*: a word bigram Markov chain fitted
to the demo corpora (Shakespeare + Python docs), each word written directly as its Mistral token ids (the word
tokenised once, with its leading space), documents of ~300 words starting with BOS. Tokenisation is skipped
there and measured separately on the real demo text. Every configuration runs in a fresh process; its peak
memory is the sampled RSS of its whole process tree (Ray's daemons aside, busy Ray workers included). All
configurations of one size must give the same file (checked by sha256). Ray workers run at the driver's priority
(`RAY_worker_niceness=0`; Ray's default, nice 15, lets any other load on a shared machine starve them).

Usage: python -m bench.training [--quick] [--large]     (default 10^6 and 10^7 tokens; --large adds 10^8)
       python -m bench training --scaling [--tokens N]    (workers 1, 2, 4, ...: `bench.scaling`)
       python -m bench.training --sizes 1e9 --configs 'budget 8 GB, Ray x2' --token-dir DIR   (keeps the file)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from workers.files import file_sha256

BOS = 1
DOC_WORDS = 300
CHAINS = 4096


# ---------------------------------------------------------------------------------------------- the corpus


def fit_chain(texts: list[str]):
    """(word token ids CSR: starts, lengths, flat ids; transition CSR: row starts, next words, cumulative probs)."""
    from workers.models.tokenizer import load_tokenizer

    index: dict[str, int] = {}
    seq = np.array([index.setdefault(w, len(index)) for t in texts for w in t.split()], dtype=np.int64)
    vocab = list(index)
    ids = load_tokenizer("mistral")(vocab, add_special_tokens=False).input_ids
    lengths = np.array([len(i) for i in ids], dtype=np.int64)
    flat = np.array([t for i in ids for t in i], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    pairs, counts = np.unique(seq[:-1].astype(np.int64) * len(vocab) + seq[1:], return_counts=True)
    src, dst = pairs // len(vocab), pairs % len(vocab)
    row_start = np.searchsorted(src, np.arange(len(vocab) + 1))
    cum = np.cumsum(counts).astype(np.float64)
    edges = np.concatenate([[0.0], cum])[row_start]  # cumulative count before each row, and the end
    per_row = np.diff(row_start)
    prob = (cum - np.repeat(edges[:-1], per_row)) / np.repeat(np.diff(edges), per_row)
    return (starts, lengths, flat), (row_start, dst, src + np.minimum(prob, 1 - 1e-12))


def demo_chain():
    """The chain fitted to both demo domains' full text."""
    from orchestrator.run.demo_corpora import pydoc_texts, shakespeare_texts

    return fit_chain(list(shakespeare_texts().values()) + list(pydoc_texts().values()))


def generate_token_file(n_tokens: int, folder: Path, chain, seed: int = 0):
    """Write `n_tokens` synthetic tokens (+ offsets) with the word chain; returns a workers.igtree.instances.TokenFile."""
    from workers.igtree.instances import TokenFile

    (starts, lengths, flat), (row_start, dst, key) = chain
    rng = np.random.default_rng(seed)
    n_words = len(lengths)
    tok_path, off_path = folder / f"synthetic-{n_tokens}.tokens", folder / f"synthetic-{n_tokens}.offsets"
    written, docs = 0, 0
    with open(tok_path, "wb") as tf, open(off_path, "wb") as of:
        while written < n_tokens:
            w = np.empty((CHAINS, DOC_WORDS), dtype=np.int64)
            w[:, 0] = rng.integers(0, n_words, CHAINS)
            for j in range(1, DOC_WORDS):
                cur = w[:, j - 1]
                dead = row_start[cur + 1] == row_start[cur]  # a word never followed: restart anywhere
                nxt = dst[np.minimum(np.searchsorted(key, cur + rng.random(CHAINS)), len(dst) - 1)]
                w[:, j] = np.where(dead, rng.integers(0, n_words, CHAINS), nxt)
            lens = lengths[w]  # (C, L) tokens per word
            doc_len = lens.sum(axis=1) + 1
            ends = np.cumsum(lens.ravel())
            idx = np.repeat(starts[w.ravel()] - (ends - lens.ravel()), lens.ravel()) + np.arange(ends[-1])
            body = flat[idx]
            doc_start = np.concatenate([[0], np.cumsum(doc_len - 1)[:-1]])
            out = np.insert(body, doc_start, BOS)  # BOS before every document
            keep_docs = int(np.searchsorted(np.cumsum(doc_len), n_tokens - written, side="left")) + 1
            out = out[: min(len(out), n_tokens - written)]
            offs = written + np.concatenate([[0], np.cumsum(doc_len)[:-1]])[:keep_docs]
            offs = offs[offs < written + len(out)]
            tf.write(out.astype(np.uint16).tobytes())
            of.write(offs.astype(np.int64).tobytes())
            written, docs = written + len(out), docs + len(offs)
        of.write(np.array([written], dtype=np.int64).tobytes())
    return TokenFile(str(tok_path), str(off_path), np.dtype(np.uint16).str, written, docs)


# ---------------------------------------------------------------------------------------------- one configuration


def run_one(cfg: dict) -> dict:
    """Train one configuration (in this process) and measure it."""
    from workers.igtree.instances import TokenFile
    from workers.igtree.partitioned import BuildTarget, build_partitioned, local_map, plan_training
    from workers.memwatch import PeakRss
    from workers.training.ibase import build_in_memory
    from workers.training.ray_tasks import RayMap

    tf = TokenFile(**cfg["tf"])
    out, work = Path(cfg["out"]), Path(cfg["work"])
    run_map = local_map
    if cfg["ray_workers"]:
        _ray_init(cfg["ray_workers"])
        run_map = RayMap()
    t0, cpu0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]

    def progress(stage: str, done: int, total: int) -> None:
        print(
            f"{time.strftime('%H:%M:%S')} {stage} {done}/{total} ({time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    with PeakRss(interval_s=0.1, pss=True) as peak:
        stage_s: dict = {}
        hot = 0
        if cfg["mode"] == "memory":
            build_in_memory(tf, 4, "gain_ratio", 1, {}, str(out))
            parts = 0
        else:
            plan = plan_training(int(cfg["budget_gb"] * 1e9), max(1, cfg["ray_workers"]))
            summary = build_partitioned(tf, 4, "gain_ratio", BuildTarget(out, work), plan, run_map, progress)
            parts, stage_s, hot = summary.partitions, summary.stage_s, summary.hot_values
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "cpu_s": time.process_time() - cpu0 + getattr(run_map, "cpu_s", 0.0),
        "peak_rss_bytes": peak.peak_bytes,
        "peak_pss_bytes": peak.peak_pss_bytes,
        "partitions": parts,
        "bytes": out.stat().st_size,
        "sha256": file_sha256(out),
        "load_start": load0,
        "load_end": os.getloadavg()[0],
        "stages_s": {k: round(v, 1) for k, v in stage_s.items()},
        "hot_values": hot,
    }


def tokenise_one(cfg: dict) -> dict:
    """Tokenise the demo corpora's text (real text, Mistral tokenizer) with 1 process or Ray workers; tokens/s."""
    from workers.corpora import TextSource
    from workers.igtree.instances import tokenize_parallel, tokenize_source
    from workers.models.tokenizer import load_tokenizer

    source = TextSource(name="demo", path=cfg["text"])
    tok = load_tokenizer("mistral")
    if cfg["ray_workers"]:
        from workers.training.ray_tasks import RayMap

        _ray_init(cfg["ray_workers"])
        t0 = time.perf_counter()
        tf = tokenize_parallel(source, "mistral", cfg["work"], RayMap(), workers=cfg["ray_workers"], docs_per_task=2000)
    else:
        t0 = time.perf_counter()
        tf = tokenize_source(source, tok, cfg["work"])
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "tokens": tf.n_tokens,
        "tokens_per_s": tf.n_tokens / wall,
        "load": os.getloadavg()[0],
        "sha256": file_sha256(tf.tokens_path),
    }


def _ray_init(workers: int, tries: int = 3) -> None:
    """A local Ray with `workers` CPUs; tried again when its node misses Ray's 30 s start window (a loaded machine)."""
    import ray

    for attempt in range(tries):
        try:
            ray.init(
                address="local", num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False
            )
            return
        except Exception:
            ray.shutdown()
            if attempt == tries - 1:
                raise
            time.sleep(5)


def _child(kind: str, cfg: dict) -> dict:
    """Run one configuration in a fresh process (clean peak memory); its JSON result."""
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "disabled",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "RAY_worker_niceness": "0",
    }  # Ray's default nice 15 starves its workers on a shared machine
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.training", f"--{kind}", json.dumps(cfg)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    last = "failed"
    for line in proc.stderr:  # passed on live (progress of long runs), the last line kept for a failure
        sys.stderr.write(line)
        last = line.strip() or last
    stdout = proc.stdout.read()
    if proc.wait():
        return {"error": last}
    return json.loads(stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- the suite


CONFIGS = [  # (label, mode, budget GB, Ray workers)
    ("in memory", "memory", None, 0),
    ("budget 1 GB", "budget", 1.0, 0),
    ("budget 4 GB", "budget", 4.0, 0),
    ("budget 1 GB, Ray x1", "budget", 1.0, 1),
    ("budget 1 GB, Ray x2", "budget", 1.0, 2),
    ("budget 4 GB, Ray x2", "budget", 4.0, 2),
    ("budget 8 GB, Ray x2", "budget", 8.0, 2),  # for 10^9 tokens: not in the default rows
]
DEFAULT_CONFIGS = [c[0] for c in CONFIGS[:6]]
IN_MEMORY_LIMIT_TOKENS = 3 * 10**7  # ~300 B/instance: 10^8 would need ~30 GB, more than this 24 GB machine


def run(
    quick: bool = False,
    sizes: list[int] | None = None,
    only: list[str] | None = None,
    token_dir: str | None = None,
    tokenise: bool = True,
) -> str:
    """Measure the default configurations (or those labelled in `only`) at each size; a Markdown section.

    With `token_dir` the token files are kept there and reused by a later run (10^9 tokens take ~20 min).
    """
    sizes = sizes or ([10**6] if quick else [10**6, 10**7])
    only = only or DEFAULT_CONFIGS
    root = Path(tempfile.mkdtemp(prefix="bench-training-", dir=token_dir))
    try:
        rows, chain = [], demo_chain()
        for n in sizes:
            t0 = time.perf_counter()
            tf = _token_file(n, Path(token_dir) if token_dir else root, chain)
            gen_s = time.perf_counter() - t0
            for label, mode, budget, workers in CONFIGS:
                if label not in only:
                    continue
                if mode == "memory" and n > IN_MEMORY_LIMIT_TOKENS:
                    rows.append((n, label, {"error": "not run: needs ~30 GB"}))
                    continue
                cfg = {
                    "tf": tf.__dict__,
                    "mode": mode,
                    "budget_gb": budget,
                    "ray_workers": workers,
                    "out": str(root / f"{n}-{len(rows)}.igtree"),
                    "work": str(root / f"work-{len(rows)}"),
                }
                result = _child("one", cfg)
                print(f"training {n:,} {label}: {result}", file=sys.stderr)
                rows.append((n, label, result))
                shutil.rmtree(cfg["work"], ignore_errors=True)
            print(f"generated {n:,} tokens in {gen_s:.1f} s", file=sys.stderr)
        tok_rows = _tokenise_rows(root) if tokenise else []
        return _markdown(rows, tok_rows)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _token_file(n: int, folder: Path, chain):
    """The synthetic token file of `n` tokens in `folder`: reused when a previous run left it complete."""
    from workers.igtree.instances import TokenFile

    meta = folder / f"synthetic-{n}.json"
    if meta.exists():
        return TokenFile(**json.loads(meta.read_text()))
    tf = generate_token_file(n, folder, chain)
    meta.write_text(json.dumps(tf.__dict__))
    return tf


def _tokenise_rows(root: Path) -> list[tuple[str, dict]]:
    """Tokenisation tokens/s on the demo corpora's real text, 1 process and 2 Ray workers."""
    from orchestrator.run.demo_corpora import write_demo_corpora

    corpora = write_demo_corpora(root / "demo")
    text = root / "demo-all.txt"
    text.write_text("\n\n".join(c.train_path.read_text() for c in corpora.values()))
    out = []
    for label, workers in (("1 process", 0), ("Ray x2", 2)):
        out.append(
            (
                label,
                _child("tokenise", {"text": str(text), "ray_workers": workers, "work": str(root / f"tok-{workers}")}),
            )
        )
    return out


def _markdown(rows, tok_rows) -> str:
    """The section: one table of training runs, a row per configuration and each cell its figures at every size
    ("10^6 / 10^7"), then a line of tokenisation throughput."""
    sizes = list(dict.fromkeys(n for n, _, _ in rows))
    first: dict[int, str] = {}
    cells: dict[str, dict[int, list[str]]] = {}
    for n, label, r in rows:
        if "error" in r:
            figures = [r["error"]] + ["-"] * 7
        else:
            first.setdefault(n, r["sha256"])
            figures = [
                f"{r['wall_s']:.1f}",
                f"{n / r['wall_s']:,.0f}",
                f"{r['cpu_s']:.1f}",
                f"{r['peak_rss_bytes'] / 1e9:.2f}",
                f"{r['partitions']} ({r.get('hot_values', 0)})",
                f"{r['bytes'] / 1e6:.1f}",
                "yes" if r["sha256"] == first[n] else "NO",
                f"{r.get('load_start', 0):.0f}-{r.get('load_end', 0):.0f}",
            ]
        cells.setdefault(label, {})[n] = figures
    lines = [
        "## Training instance bases: in memory and out of core (`bench/training.py`)",
        "",
        (
            "Synthetic token files (a word bigram chain fitted to the demo corpora, written as Mistral token ids: "
            "tokenisation skipped), window 4, gain ratio. Each run is a fresh process; peak = sampled RSS of its "
            "whole process tree (busy Ray workers included, Ray's daemons aside). `same file`: sha256 equal to "
            "the first row's at its size. `hot`: partitions of one value split by the second position. Each cell "
            f"gives {' / '.join(f'{n:,}' for n in sizes)} tokens."
        ),
        "",
        "| path | wall (s) | tokens/s | CPU (s) | peak RSS (GB) | partitions (hot) | file (MB) | same file | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, by_n in cells.items():
        per_size = [by_n.get(n, ["-"] * 8) for n in sizes]
        lines.append(f"| {label} | " + " | ".join(" / ".join(v) for v in zip(*per_size)) + " |")
    ref = next((r.get("sha256") for _, r in tok_rows if "sha256" in r), None)
    runs = [
        f"{label}: {r['error']}"
        if "error" in r
        else f"{label} {r['tokens']:,} tokens in {r['wall_s']:.1f} s ({r['tokens_per_s']:,.0f} tokens/s, same token "
        f"file: {'yes' if r['sha256'] == ref else 'NO'}, load avg {r.get('load', 0):.0f})"
        for label, r in tok_rows
    ]
    if runs:
        lines += [
            "",
            f"Tokenisation of real text (the demo corpora, Mistral tokenizer), separately: {'; '.join(runs)}.",
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        import logging

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        print(json.dumps(run_one(json.loads(sys.argv[2]))))
    elif len(sys.argv) > 2 and sys.argv[1] == "--tokenise":
        print(json.dumps(tokenise_one(json.loads(sys.argv[2]))))
    else:
        import argparse

        ap = argparse.ArgumentParser(description="Training benchmark (see the module docstring).")
        ap.add_argument("--quick", action="store_true", help="10^6 tokens only")
        ap.add_argument("--large", action="store_true", help="10^6, 10^7 and 10^8 tokens")
        ap.add_argument("--sizes", default=None, help="comma-separated token counts, e.g. 1e8")
        ap.add_argument("--configs", default=None, help="semicolon-separated row labels, e.g. 'budget 4 GB'")
        ap.add_argument("--token-dir", default=None, help="keep (and reuse) the synthetic token files here")
        ap.add_argument("--no-tokenise", action="store_true", help="skip the tokenisation rows")
        a = ap.parse_args()
        sizes = [int(float(x)) for x in a.sizes.split(",")] if a.sizes else ([10**6, 10**7, 10**8] if a.large else None)
        print(
            run(
                quick=a.quick,
                sizes=sizes,
                only=a.configs.split(";") if a.configs else None,
                token_dir=a.token_dir,
                tokenise=not a.no_tokenise,
            )
        )
