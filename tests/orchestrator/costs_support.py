"""A small replayed experiment built with the real decoding loop on a tiny real transformers verifier, for the cost
table tests: greedy references, then per prompt, regime and strategy one generation timed on the verifier (twice:
the run's own noise) and one replayed from the reference (`workers.replay.verifier`), both stored as a run stores
them, and the experiment's own round-cost table measured by `workers.decoding.roundtimer`.

Strategies: plain (k = 0), the in-session n-gram (k = 3) and a fixed token tree of 3 nodes (`probe-tree`: the
roundtimer's probe draft, whose tree every round proposes), so chains, trees and every regime's passes are there.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from storage import store
from storage.cell_spec import CellParams, CellSpec
from storage.db import open_db
from storage.repredict import is_tree
from tests.tiny_models import tiny_lm
from workers.contracts import CostModelRecord, GenerationRecord, ReferenceRecord
from workers.decoding import DecodeOptions, generate, greedy_reference
from workers.decoding.costmodel import RoundCosts, build_table, predict_generation
from workers.decoding.passes import REGIMES
from workers.decoding.roundtimer import ProbeDraft, probe_tree
from workers.drafts.ngram import NgramDraft
from workers.interfaces import PlainDraft
from workers.portable_tables import MeasureRequest, make_references, measure_loaded
from workers.replay.verifier import replay_generate
from workers.verifier import Verifier

VOCAB = 512
MAX_NEW = 12
STRATEGIES = (("plain", 0), ("ngram", 3), ("probe-tree", 3))


def tiny_model(seed: int = 0, hidden: int = 64, layers: int = 2, vocab: int = VOCAB):
    """A small random Llama whose output head echoes its input, so the n-gram draft is accepted at times."""
    return tiny_lm("llama", seed, vocab=vocab, hidden=hidden, layers=layers, echo=0.5)


def tiny_verifier(**kw) -> Verifier:
    return Verifier(tiny_model(**kw), device="cpu")


def prompts(n: int, length: int = 24, seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (length,), generator=g).tolist() for _ in range(n)]


def measure(
    verifier: Verifier, name: str, threads: int, contexts=(16, 48), repeats: int = 3
) -> tuple[RoundCosts, list]:
    """The verifier's table at `threads` torch threads, its reference check against its own float32 references."""
    with threads_set(threads):
        req = MeasureRequest(name, max_k=3, trees=(3,), contexts=contexts, repeats=repeats, budget_s=None)
        refs = make_references(name, verifier, prompts(2, seed=9), 8)
        return measure_loaded(verifier, [t for p in prompts(2, seed=3) for t in p], req, refs)


@contextmanager
def threads_set(threads: int):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def draft_for(strategy: str, vocab: int, ref: list[int]):
    if strategy == "plain":
        return PlainDraft(), False
    if strategy == "ngram":
        return NgramDraft(3), False
    probe = ProbeDraft()
    probe.tree = probe_tree(ref, 3, vocab)
    return probe, True


Coord = tuple[int, str, str, int]  # (prompt index, regime, strategy, k)


@dataclass
class Built:
    url: str
    exp_id: int
    own: RoundCosts | None
    coords: list[Coord]
    prompts: list[list[int]]
    refs: list[list[int]]


def _generate(verifier: Verifier, c: Coord, prompt: list[int], ref: list[int]):
    _, regime, strategy, k = c
    draft, trees = draft_for(strategy, verifier.vocab_size, ref)
    return generate(verifier, draft, prompt, DecodeOptions(regime, k, MAX_NEW, trees=trees))


def time_interleaved(verifier: Verifier, b: Built, rounds: int, threads: int, name: str = "tiny"):
    """`rounds` times in turn: one repeat of the round-cost table (`measure_loaded`), then each coordinate's
    generation timed once, all at `threads` threads, so that a busy spell of the shared machine slows the table and
    the generations alike. (The table of every repeat's rounds with the last one's meta, per coordinate its runs.)"""
    samples, runs, table = [], {c: [] for c in b.coords}, None
    with threads_set(threads), torch.inference_mode():
        for c in b.coords:  # warm, untimed
            _generate(verifier, c, b.prompts[c[0]], b.refs[c[0]])
        for _ in range(rounds):
            table, got = measure(verifier, name, threads, repeats=1)
            samples += got
            for c in b.coords:
                res = _generate(verifier, c, b.prompts[c[0]], b.refs[c[0]])
                assert list(res.tokens) == b.refs[c[0]]
                runs[c].append(res)
    return build_table(table.verifier, table.device, samples, table.meta), runs


def _cell(s, exp_id: int, spec: CellSpec) -> int:
    store.add_cells(s, exp_id, [spec])
    return next(c.id for c in store.pending_cells(s, exp_id, (spec.kind,)) if c.key == spec.key)


def _coords(c: Coord, measure: str) -> CellSpec:
    i, regime, strategy, k = c
    return CellSpec(
        key=f"{strategy}-{k}-{regime}-{i}-{measure}",
        kind="sweep" if measure == "timed" else "replay",
        strategy=strategy,
        draft=strategy.removesuffix("-tree"),
        task="t",
        prompt_index=i,
        k=k,
        regime=regime,
        params=CellParams(prompt=f"p{i}", reference=f"ref{i}"),
    )


def _reference(s, exp_id: int, vocab: int, i: int, prompt: list[int], ref: list[int]) -> None:
    spec = CellSpec(key=f"ref{i}", kind="reference", task="t", prompt_index=i, params=CellParams(prompt=f"p{i}"))
    record = ReferenceRecord(f"p{i}", tuple(prompt), tuple(ref), "", 0.1, vocab, None)
    store.store_reference(s, _cell(s, exp_id, spec), record)


def replayed(verifier: Verifier, c: Coord, prompt: list[int], ref: list[int], own: RoundCosts):
    """The coordinate's generation replayed from its reference, predicted with `own` as a run predicts it."""
    _, regime, strategy, k = c
    draft, trees = draft_for(strategy, verifier.vocab_size, ref)
    res = replay_generate(draft, prompt, ref, verifier.vocab_size, DecodeOptions(regime, k, MAX_NEW, trees=trees))
    rec = GenerationRecord(res.decoded, len(prompt), "", "replay", measure="replay")
    wall = predict_generation(own, regime, rec.passes, rec.draft_s, is_tree(strategy))
    return rec.replaced(wall_s=wall, verify_s=wall - rec.draft_s, predicted_wall_s=wall, wall_s_runs=(wall,))


def timed(c: Coord, results, prompt: list[int], own: RoundCosts):
    """A timed generation's record: its runs, the fastest one's figures, the prediction beside it."""
    best = min(results, key=lambda r: r.wall_s)
    rec = GenerationRecord(best.decoded, len(prompt), "", "cpu", wall_s_runs=tuple(r.wall_s for r in results))
    return replace(rec, predicted_wall_s=predict_generation(own, c[1], rec.passes, rec.draft_s, is_tree(c[2])))


def plan(verifier: Verifier, n_prompts: int) -> Built:
    """The coordinates, prompts and greedy references of an experiment not yet stored."""
    ps = prompts(n_prompts)
    with torch.inference_mode():
        refs = [greedy_reference(verifier, p, MAX_NEW) for p in ps]
    coords = [(i, regime, s, k) for i in range(n_prompts) for regime in REGIMES for s, k in STRATEGIES]
    return Built("", 0, None, coords, ps, refs)


def build(path: Path, verifier: Verifier, n_prompts: int = 2, threads: int = 2, rounds: int = 2, spec: str = ""):
    """The experiment "small" in a new SQLite file (the module doc): its own table and timed generations measured
    interleaved at `threads` threads, each coordinate timed `rounds` times, and replayed."""
    b = plan(verifier, n_prompts)
    own, runs = time_interleaved(verifier, b, rounds, threads)
    url = f"sqlite:///{path}"
    _, Session = open_db(url)
    with Session() as s:
        exp = store.upsert_experiment(s, "small", spec, "h", None)
        record = CostModelRecord(own.verifier, own.device, own.to_json(), (), 1.0, 0.0, 1.0)
        store.store_cost_model(s, _cell(s, exp.id, CellSpec(key="costs", kind="costmodel")), record)
        for i, (prompt, ref) in enumerate(zip(b.prompts, b.refs)):
            _reference(s, exp.id, verifier.vocab_size, i, prompt, ref)
        for c in b.coords:
            prompt, ref = b.prompts[c[0]], b.refs[c[0]]
            store.store_generation(s, _cell(s, exp.id, _coords(c, "timed")), timed(c, runs[c], prompt, own))
            store.store_generation(s, _cell(s, exp.id, _coords(c, "replay")), replayed(verifier, c, prompt, ref, own))
        s.commit()
        return replace(b, url=url, exp_id=exp.id, own=own)
