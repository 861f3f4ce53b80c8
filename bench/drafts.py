"""Benchmark: `lookup` against transformers' prompt lookup, and every draft side by side on the demo models.

The verifier and the neural draft are the demo's small models (`workers.models.demo`, trained here on first use
and cached); prompts are the first words of the demo tasks' test documents (both domains). Per domain, the
corpus drafts (`olifant-<d>`, `rest-<d>`) are built from that domain's train file, as the demo builds them.
Per draft x regime x k: acceptance, MAL, speedup over plain (plain measured in the same run, same prompts),
draft ms per new token, and the size of the draft's index. Then transformers' own
`generate(prompt_lookup_num_tokens=k)` against greenspec's `lookup` in each cached regime, same model and
prompts, both checked against greedy `generate`. Warm-up runs are excluded; the fastest of `repeats` runs per
prompt is kept (the least disturbed on shared cores).
"""

from __future__ import annotations

import inspect
import tempfile
import time
from pathlib import Path

import torch

from workers.decoding import GenerationResult, greedy_reference, speculative_generate
from workers.drafts import make_draft
from workers.metrics import acceptance_rate, mal

DOMAINS = ("shakespeare", "pydoc")


def regimes() -> dict[str, dict]:
    """The verification regimes speculative_generate offers (cached-standard where it has `fastpath`)."""
    out = {"uncached": {"cached": False}, "cached": {"cached": True}}
    if "fastpath" in inspect.signature(speculative_generate).parameters:
        out["cached-standard"] = {"cached": True, "fastpath": False}
    return out


def demo_setup(work: Path, n_prompts: int):
    """The demo verifier and draft models, tokenizer, prompts per domain and the demo train files."""
    from transformers import AutoModelForCausalLM

    from orchestrator.run.demo_corpora import write_demo_corpora
    from workers.corpora import TextSource
    from workers.corpora.tasks import load_prompts
    from workers.models.demo import ensure_demo_models
    from workers.models.tokenizer import load_tokenizer
    from workers.verifier import Verifier

    corpora = write_demo_corpora(work / "data")
    models = ensure_demo_models([c.train_path for c in corpora.values()])
    tok = load_tokenizer("mistral")
    verifier = Verifier(AutoModelForCausalLM.from_pretrained(models.verifier_dir).eval())
    draft_model = AutoModelForCausalLM.from_pretrained(models.draft_dir).eval()
    prompts = {
        d: [
            tok(p.text).input_ids
            for p in load_prompts(TextSource(name=d, path=str(corpora[d].test_path)), n_prompts).prompts
        ]
        for d in DOMAINS
    }
    trains = {d: TextSource(name=d, path=str(corpora[d].train_path)) for d in DOMAINS}
    return verifier, draft_model, tok, prompts, trains


def corpus_drafts(trains: dict, work: Path) -> tuple[dict, dict]:
    """Per domain: olifant (IGTree) and rest (datastore) drafts, and each index's bytes and build seconds."""
    from workers.training.datastore import build_datastore
    from workers.training.ibase import IBaseRequest, train_instance_base

    drafts, built = {}, {}
    for d, source in trains.items():
        ib = train_instance_base(IBaseRequest(source, "mistral", work / "artifacts"))
        ds = build_datastore(source, "mistral", work / "artifacts")
        drafts[f"olifant-{d}"] = (d, make_draft("olifant", ibase=ib.path))
        drafts[f"rest-{d}"] = (d, make_draft("rest", datastore=ds.path))
        built[f"olifant-{d}"] = (ib.bytes, ib.train_s, ib.tokens)
        built[f"rest-{d}"] = (ds.bytes, ds.build_s, ds.meta["tokens"])
    return drafts, built


def timed_runs(verifier, draft, prompts, n_new, k, regime: dict, repeats: int) -> list[GenerationResult]:
    """Warm up once, then per prompt the fastest of `repeats` generations."""
    speculative_generate(verifier, draft, prompts[0], 8, k, **regime)
    runs = [[speculative_generate(verifier, draft, p, n_new, k, **regime) for p in prompts] for _ in range(repeats)]
    return [min(per_prompt, key=lambda r: r.wall_s) for per_prompt in zip(*runs)]


def index_label(name: str, draft, built: dict) -> str:
    """What the draft keeps besides the generation's own context: its file (olifant, rest: its size and build time,
    tokenising included), its weights (neural), or nothing."""
    if name in built:
        return f"{built[name][0] / 2**20:.1f} MiB, built in {built[name][1]:.1f} s"
    if getattr(draft, "model", None) is not None:  # a model-backed draft keeps its weights
        return f"{sum(p.numel() * p.element_size() for p in draft.model.parameters()) / 2**20:.1f} MiB (weights)"
    return "0 (context only)" if name != "plain" else "-"


def measure(verifier, drafts: dict, prompts: dict, refs: dict, ks, n_new: int, repeats: int, built: dict):
    """Rows of the drafts table, and how many outputs differed from greedy `generate`."""
    rows, mismatches = [], 0
    for regime_name, regime in regimes().items():
        for domain in DOMAINS:
            plain = timed_runs(verifier, drafts["plain"][1], prompts[domain], n_new, 1, regime, repeats)
            plain_wall = sum(r.wall_s for r in plain)
            for name, (only, draft) in drafts.items():
                if only not in (None, domain):
                    continue
                for k in [0] if name == "plain" else ks:
                    res = (
                        plain
                        if name == "plain"
                        else timed_runs(verifier, draft, prompts[domain], n_new, k, regime, repeats)
                    )
                    mismatches += sum(list(r.tokens) != ref for r, ref in zip(res, refs[domain]))
                    rows.append(row(name, domain, regime_name, k, res, plain_wall, index_label(name, draft, built)))
    return rows, mismatches


def row(name, domain, regime, k, res, plain_wall, index) -> list:
    """One table row."""
    accepted, drafted = sum(r.accepted for r in res), sum(r.drafted for r in res)
    steps, n_tok, wall = sum(r.steps for r in res), sum(r.n_tokens for r in res), sum(r.wall_s for r in res)
    return [
        name,
        domain,
        regime,
        k,
        f"{acceptance_rate(accepted, drafted):.2f}",
        f"{mal(accepted, steps):.2f}",
        f"{plain_wall / wall:.2f}x",
        f"{sum(r.draft_s for r in res) / n_tok * 1e3:.3f}",
        index,
    ]


@torch.inference_mode()
def hf_lookup(model, prompt: list[int], n_new: int, k: int) -> tuple[list[int], float]:
    """transformers' own prompt lookup decoding: (new tokens, wall seconds)."""
    from transformers import GenerationConfig

    ids = torch.tensor([prompt])
    config = GenerationConfig(
        do_sample=False, max_new_tokens=n_new, prompt_lookup_num_tokens=k, eos_token_id=None, pad_token_id=0
    )  # no EOS: fixed-length outputs, as greenspec's runs
    t0 = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return out[0, len(prompt) :].tolist(), time.perf_counter() - t0


def lookup_vs_transformers(
    verifier, all_prompts: list, all_refs: list, ks, n_new: int, repeats: int
) -> tuple[list, int]:
    """greenspec's `lookup` in each cached regime against transformers' prompt lookup, same prompts; fastest runs."""
    draft, rows, mismatches = make_draft("lookup"), [], 0
    hf_lookup(verifier.model, all_prompts[0], 8, 3)  # warm-up
    for k in ks:
        hf = [
            min((hf_lookup(verifier.model, p, n_new, k) for _ in range(repeats)), key=lambda x: x[1])
            for p in all_prompts
        ]
        mismatches += sum(toks != ref for (toks, _), ref in zip(hf, all_refs))
        hf_wall = sum(w for _, w in hf)
        for name, regime in regimes().items():
            if not regime["cached"]:
                continue
            res = timed_runs(verifier, draft, all_prompts, n_new, k, regime, repeats)
            mismatches += sum(list(r.tokens) != ref for r, ref in zip(res, all_refs))
            wall = sum(r.wall_s for r in res)
            rows.append(
                [k, name, f"{wall / len(res) * 1e3:.1f}", f"{hf_wall / len(hf) * 1e3:.1f}", f"{hf_wall / wall:.2f}x"]
            )
    return rows, mismatches


def run(quick: bool = False) -> str:
    """The measurements, as Markdown: lookup vs transformers, draft cost alone, every draft on the demo models."""
    return "\n\n".join([run_lookup(quick), run_latency(quick), run_drafts(quick)])


def one_thread(fn):
    """Run fn() with torch on one thread (small models are fastest, and steadiest on shared cores, so)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)


def run_lookup(quick: bool = False) -> str:
    """`lookup` vs transformers' prompt lookup on bench/decoding's random verifier, which loops (lookup's case)."""
    from bench.decoding import PROMPTS, build_verifier
    from workers.models.tokenizer import load_tokenizer

    def measure_it() -> str:
        tok, verifier = load_tokenizer("mistral"), build_verifier()
        n_new, ks, repeats = (24, [3], 1) if quick else (64, [3, 8], 3)
        prompts = [tok(p).input_ids for p in PROMPTS[: 2 if quick else 4]]
        refs = [greedy_reference(verifier, p, n_new) for p in prompts]
        rows, mismatches = lookup_vs_transformers(verifier, prompts, refs, ks, n_new, repeats)
        return render_lookup(rows, len(prompts), n_new, repeats, mismatches)

    return one_thread(measure_it)


def run_drafts(quick: bool = False) -> str:
    """Every draft x regime x k on the demo models (trained on first use, then cached)."""

    def measure_it() -> str:
        with tempfile.TemporaryDirectory(prefix="bench-drafts-") as tmp:
            return _run_drafts(quick, Path(tmp))

    return one_thread(measure_it)


def _run_drafts(quick: bool, work: Path) -> str:
    """The measurement behind `run_drafts`."""
    n_prompts, n_new, ks, repeats = (2, 32, [3], 1) if quick else (3, 48, [3, 8], 2)
    verifier, draft_model, tok, prompts, trains = demo_setup(work, n_prompts)
    refs = {d: [greedy_reference(verifier, p, n_new) for p in prompts[d]] for d in DOMAINS}
    drafts = {
        "plain": (None, make_draft("plain")),
        "ngram": (None, make_draft("ngram", n=4)),
        "lookup": (None, make_draft("lookup")),
        "suffix": (None, make_draft("suffix")),
        "neural": (None, make_draft("neural", model=draft_model)),
    }
    more, built = corpus_drafts(trains, work)
    drafts.update(more)
    rows, mismatches = measure(verifier, drafts, prompts, refs, ks, n_new, repeats, built)
    return render_drafts(rows, built, n_prompts, n_new, repeats, mismatches)


def render_lookup(rows, n_prompts, n_new, repeats, mismatches) -> str:
    """The Markdown section of the lookup comparison: one row per k, transformers' time, then greenspec's time and
    the ratio in each cached regime."""
    from tabulate import tabulate

    by_k: dict[int, list] = {}
    for k, _, ours, theirs, ratio in rows:
        by_k.setdefault(k, [k, theirs]).extend([ours, ratio])
    head = ["k", "transformers ms"]
    head += [f"{what} {regime}" for regime in dict.fromkeys(r[1] for r in rows) for what in ("greenspec ms", "ratio")]
    return "\n".join(
        [
            "## Drafts: prompt lookup, cost alone, all drafts on the demo models (`bench/drafts.py`)",
            "",
            "**`lookup` vs transformers' prompt lookup.** greenspec's `lookup` draft in each cached regime against transformers' own "
            "`generate(prompt_lookup_num_tokens=k)`, side by side in one run: the random-weights Mistral of "
            f"`bench/decoding.py` (~20M parameters, fp32, CPU, 1 thread; it loops, which prompt lookup copies), {n_prompts} "
            f"prompts x {n_new} new tokens, fastest of {repeats} runs per prompt, warm-up excluded. Outputs differing "
            f"from greedy `generate`: {mismatches}. ms per generation; `ratio` = transformers' time / greenspec's "
            "(above 1: greenspec faster).",
            "",
            tabulate(list(by_k.values()), headers=head, tablefmt="github", disable_numparse=True),
        ]
    )


def compact_rows(rows) -> list[list]:
    """One row per draft and domain (plain, the baseline, left out): acceptance and MAL of the uncached regime (the
    standard scheme's are the same; the paper's cached regime judges its first token apart), the speedup in each
    regime and the draft's median ms per token, each "k3 / k8" over the run's ks."""
    by: dict[tuple, dict] = {}
    for name, domain, regime, k, accept, mal_, speedup, ms, index in rows:
        if name == "plain":
            continue
        cell = by.setdefault((name, domain), {"index": index, "ms": []})
        cell.setdefault(regime, {})[k] = (accept, mal_, speedup)
        cell["ms"].append(float(ms))
    out = []
    for (name, domain), cell in by.items():
        speeds = [_per_k(cell[regime], 2) for regime in regimes()]
        ms = sorted(cell["ms"])[len(cell["ms"]) // 2]
        accept, mal_ = _per_k(cell["uncached"], 0), _per_k(cell["uncached"], 1)
        out.append([name, domain, accept, mal_, *speeds, f"{ms:.3f}", cell["index"]])
    return out


def _per_k(by_k: dict, i: int) -> str:
    """Field i of each k's (accept, MAL, speedup), joined "k3 / k8"."""
    return " / ".join(by_k[k][i] for k in sorted(by_k))


def render_drafts(rows, built, n_prompts, n_new, repeats, mismatches) -> str:
    """The Markdown section of the all-drafts table."""
    from tabulate import tabulate

    ks = " / ".join(str(k) for k in sorted({r[3] for r in rows if r[0] != "plain"}))
    return "\n".join(
        [
            f"**All drafts on the demo models.** Demo verifier and neural draft (`greenspec demo`'s models, fp32, CPU, 1 thread); {n_prompts} prompts per "
            f"domain x {n_new} new tokens, fastest of {repeats} runs per prompt, warm-up excluded; corpus drafts on their "
            f"own domain only. Outputs differing from transformers' greedy `generate`: {mismatches}. Each cell gives "
            f"k = {ks}. `accept` and `MAL`: the uncached regime's (the standard scheme's are the same); speedup: over "
            "plain in the same regime and domain; `draft ms/token`: draft seconds per new token (median over regimes "
            "and k). `index`: what the draft keeps besides the generation's own context (a corpus index's build time "
            "from the demo train file, tokenising included).",
            "",
            tabulate(
                compact_rows(rows),
                headers=[
                    "draft",
                    "domain",
                    "accept",
                    "MAL",
                    *(f"speedup {r}" for r in regimes()),
                    "draft ms/token",
                    "index",
                ],  # fmt: skip
                tablefmt="github",
            ),
        ]
    )


def run_latency(quick: bool = False) -> str:
    """Draft cost alone (no verifier): ms per propose(k=8) over real prompts+text."""
    from orchestrator.run.demo_corpora import write_demo_corpora
    from workers.corpora import TextSource, iter_documents
    from workers.models.tokenizer import load_tokenizer
    from workers.training.datastore import build_datastore
    from workers.training.ibase import IBaseRequest, train_instance_base

    with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
        work = Path(tmp)
        corpora = write_demo_corpora(work / "data")
        tok = load_tokenizer("mistral")
        drafts = {"ngram": make_draft("ngram", n=4), "lookup": make_draft("lookup"), "suffix": make_draft("suffix")}
        for d in DOMAINS:
            source = TextSource(name=d, path=str(corpora[d].train_path))
            ds = build_datastore(source, "mistral", work / "artifacts")
            drafts[f"rest-{d}"] = make_draft("rest", datastore=ds.path)
        ib = train_instance_base(
            IBaseRequest(TextSource(name="pydoc", path=str(corpora["pydoc"].train_path)), "mistral", work / "artifacts")
        )
        drafts["olifant-pydoc"] = make_draft("olifant", ibase=ib.path)
        docs = [
            tok(doc).input_ids
            for d in DOMAINS
            for doc, _ in zip(iter_documents(TextSource(name=d, path=str(corpora[d].test_path))), range(3))
        ]
        times = {name: propose_ms(draft, docs, 8, 20 if quick else 60) for name, draft in drafts.items()}
    return render_latency(times)


def render_latency(times: dict[str, list[str]]) -> str:
    """The Markdown section of the draft cost alone: a row of medians and one of p90s, a column per draft."""
    from tabulate import tabulate

    rows = [[stat, *(t[i] for t in times.values())] for i, stat in enumerate(("median", "p90"))]
    return "\n".join(
        [
            "**Draft cost alone.** Each draft's `propose(context, k=8)` timed alone over growing contexts of real demo test documents "
            "(Mistral tokenizer; 3 documents per domain), as a generation calls it; ms per call (median, p90). The "
            "corpus indexes (rest, olifant) are built from the demo train files (their sizes: `index` below).",
            "",
            tabulate(rows, headers=["ms per call", *times], tablefmt="github", disable_numparse=True),
        ]
    )


def propose_ms(draft, docs: list[list[int]], k: int, calls: int) -> list[str]:
    """Median and p90 ms of draft.propose over contexts growing through each document (a new session per doc)."""
    import numpy as np

    times = []
    for doc in docs:
        draft.reset()
        for end in np.linspace(min(16, len(doc)), len(doc), num=calls // len(docs) + 1).astype(int):
            t0 = time.perf_counter()
            draft.propose(doc[:end], k)
            times.append(time.perf_counter() - t0)
    ms = np.array(times) * 1e3
    return [f"{np.median(ms):.3f}", f"{np.percentile(ms, 90):.3f}"]
