"""The costmodel bench's arithmetic on made-up timings (the 2-context table keeps each row's end contexts only, and
the error table reports what its legend says) and its order of table turns and timings on a real tiny verifier."""

import numpy as np
import pandas as pd
import pytest

from bench.costmodel import cells, end_contexts, error_table, grid
from workers.decoding import REGIMES


def test_the_grid_is_timed_prompt_by_prompt_every_regime_and_cell_of_a_prompt_back_to_back():
    order = grid(3)
    assert sorted(order) == sorted({(r, c, i) for r in REGIMES for c in range(len(cells())) for i in range(3)})
    block = len(REGIMES) * len(cells())
    for i in range(3):  # a slow spell over one prompt's minutes meets every regime and band, not one band's block
        assert {(r, c) for r, c, p in order[i * block : (i + 1) * block]} == {
            (r, c) for r in REGIMES for c in range(len(cells()))
        }
        assert {p for *_, p in order[i * block : (i + 1) * block]} == {i}


def test_end_contexts_keeps_each_rows_shortest_and_longest_context():
    samples = [("cached", "chain", n, c, 0.1) for n in (1, 2) for c in (50, 80, 120, 200)]
    samples += [("cached", "chain", 3, c, 0.2) for c in (60, 90)] + [("uncached", "chain", 1, 70, 0.3)] * 2
    kept = end_contexts(samples)
    assert {(s[2], s[3]) for s in kept if s[0] == "cached"} == {(1, 50), (1, 200), (2, 50), (2, 200), (3, 60), (3, 90)}
    assert kept.count(("uncached", "chain", 1, 70, 0.3)) == 2


def test_error_table_reports_bias_noise_and_the_two_context_tables_error():
    rows = [
        {"regime": "cached", "strategy": s, "k": k, "band": b, "prompt": i, "n_tokens": 10, "wall_s": w,
         "second_s": (1.5 if s == "lookup" else 1.02) * w, "pace": 1.0, "predicted_s": 0.9 * w * f, "ends_s": w}
        for s, k, b, w, f in (("plain", 0, "plain", 1.0, 1), ("ngram", 1, "k = 1", 0.8, 1), ("lookup", 4, "2-4", 0.6, 1.4), ("ngram", 8, "5+", 0.7, 1))
        for i in range(3)
    ]  # fmt: skip
    out = error_table(pd.DataFrame(rows)).set_index("band")
    assert out.loc["plain", "bias"] == pytest.approx(1 / 0.9 - 1)
    assert out.loc["all", "noise"] == pytest.approx(0.02 / 2**0.5)  # the median: lookup's 3 rows of 12 are 0.5
    assert out.loc["all", "2 contexts: error (bias)"] == "0.000 (+0.000)"
    # measured speedups over plain rank ngram@1 < ngram@8 < lookup; predicted, lookup (40% slower) comes first
    assert out.loc["all", "Spearman"] == pytest.approx(-0.5)
    # the second pass 2% slower, lookup's 50%: measured again, lookup comes first, ngram@1 second
    assert out.loc["all", "Spearman, t2 vs t1"] == pytest.approx(-0.5)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--turns"], "--turns: expected one argument"),
        (["--turns", "0"], "needs a whole number of parts per pass"),
        (["--turns", "x", "--smollm"], "needs a whole number of parts per pass"),
        (["--llama"], "unrecognized arguments: --llama"),
    ],
)
def test_bad_options_are_refused_with_exit_2_before_anything_is_timed(argv, says, capsys):
    from bench.costmodel import main

    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert says in capsys.readouterr().err


def test_the_tables_turns_fall_before_the_first_passs_parts_only(monkeypatch):
    """As in a run: the table's repeats among the timings they predict (two before each part of the first pass), the
    second pass timed for the noise alone; every row is predicted from the table of those repeats (a real tiny
    verifier, 4 new tokens)."""
    import bench.costmodel as bench
    import workers.decoding.roundtimer as roundtimer
    from tests.tiny_models import tiny_lm
    from workers.verifier import Verifier

    events, paces, measure, timed = [], [], roundtimer.measure_round_costs, bench.timed_pass

    def measuring(*args, **kwargs):
        events.append(("table", kwargs["repeats"]))
        turn, samples = measure(*args, **kwargs)
        paces.extend(turn.meta["pace_runs"])
        return turn, samples

    def timing(verifier, prompt_ids, n_new, part, progress):
        events.append(("pass", len(part)))
        return timed(verifier, prompt_ids, n_new, part, progress)

    monkeypatch.setattr(roundtimer, "measure_round_costs", measuring)
    monkeypatch.setattr(bench, "timed_pass", timing)
    prompt_ids = [list(range(3, 30)), list(range(40, 60)) * 2]
    rows, table, *_ = bench.generations(Verifier(tiny_lm("llama", 0, vocab=300)), prompt_ids, 4, 44, 20, 2)
    part = len(grid(2)) // 2
    assert events == [("table", 2), ("pass", part), ("table", 2), ("pass", part), ("pass", part), ("pass", part)]
    assert len(paces) == 2 * 3 and table.meta["pace_s"] == pytest.approx(float(np.median(paces)))  # 3 a turn
    assert len(rows) == len(grid(2)) and (rows["predicted_s"] > 0).all() and (rows["second_s"] > 0).all()
