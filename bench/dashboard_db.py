"""Generated greenspec databases of realistic shape for the dashboard benchmark and the large-database test.

`generate(url, n)` writes one experiment of about `n` generations with bulk inserts (SQLAlchemy Core executemany,
not the ORM): 10 strategies x 5 tasks x k {3, 5, 8} x 2 regimes (plain once per task x regime), ~100 new tokens
each with per-round records, a reference per task x prompt, one cell per result, and 10 Hz power samples over a
quarter of the generations. Values are random but consistent (tokens = per-round tokens summed, rates from the
stored counts), so every page has something real to aggregate; they are not measurements. `end_run(url)` then does
what a run's driver does as the run ends: it stores the summaries the readers show
(`orchestrator.run.summaries.keep_summaries`).

Example:
    >>> generate("sqlite:////tmp/g100k.db", 100_000)
    >>> end_run("sqlite:////tmp/g100k.db")   # a finished run's database
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from storage.db import open_db
from storage.models import Cell, Experiment, Generation, PowerSample, Reference

EXPERIMENT = "generated"
TASKS = ("wikitext", "pubmed", "eurlex", "fineweb", "code")
STRATEGIES = {
    "plain": "plain",
    "ngram": "ngram",
    "neural": "neural",
    "olifant-wikitext": "olifant",
    "olifant-pubmed": "olifant",
    "olifant-eurlex": "olifant",
    "olifant-fineweb": "olifant",
    "lookup": "lookup",
    "suffix": "suffix",
    "rest-wikitext": "rest",
}
KS = (3, 5, 8)
REGIMES = ("uncached", "cached")
N_TOKENS = 100
T0_S = 1_750_000_000.0
CREATED = dt.datetime(2026, 1, 1)  # naive: the driver adapts it for SQLite and PostgreSQL alike
SAMPLE_HZ = 10
CHUNK = 5_000
WORDS = (
    "the of and to in a is that for it as was with be by on not he this are or his from at which but have an "
    "they you were their one all we can her has there been if more when will would who so no patients study "
    "court article regulation model data results treatment shall member states commission species album"
).split()
SPEC_TOML = """[experiment]
name = "generated"
[verifier]
model = "demo:verifier"
tokenizer = "mistral"
"""


@dataclass(frozen=True)
class Generated:
    """What `generate` wrote."""

    generations: int
    prompts: int
    power_samples: int


def grid() -> list[tuple[str, str, str, int, str]]:
    """(strategy, draft, task, k, regime) of every generation of one prompt: 280 with the default shape."""
    return [
        (s, d, t, k, r)
        for r in REGIMES
        for t in TASKS
        for s, d in STRATEGIES.items()
        for k in ((0,) if d == "plain" else KS)
    ]


def _key(*parts) -> str:
    return hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()


def _rounds(rng: np.random.Generator, k: int, p: float) -> list[int]:
    """Accepted draft tokens per round until N_TOKENS tokens (each round adds accepted + 1)."""
    if k == 0:
        return [0] * N_TOKENS
    accepted = np.minimum(rng.geometric(1 - p, size=N_TOKENS) - 1, k)  # P(one more accepted) = p, at most k
    made = np.cumsum(accepted + 1)
    n = int(np.searchsorted(made, N_TOKENS)) + 1  # rounds needed to reach N_TOKENS
    out = accepted[:n].tolist()
    out[-1] -= int(made[n - 1]) - N_TOKENS  # the last round is cut at the budget
    return out


@dataclass(frozen=True)
class Pool:
    """Pre-encoded token lists and texts drawn at random per row (building 10^6 of each would dominate the time)."""

    tokens: tuple[str, ...]
    texts: tuple[str, ...]


def make_pool(rng: np.random.Generator, size: int = 4096) -> Pool:
    """`size` random token-id lists (JSON) and texts of 80 words."""
    tokens = tuple(json.dumps(rng.integers(3, 32000, size=N_TOKENS).tolist()) for _ in range(size))
    texts = tuple(" ".join(WORDS[i] for i in rng.choice(len(WORDS), size=80)) for _ in range(size))
    return Pool(tokens, texts)


def _generation(rng, pool: Pool, exp_id: int, cell_id: int, point, prompt: int, t_s: float, with_samples: bool) -> dict:
    """One consistent generation row starting at t_s."""
    strategy, draft, task, k, regime = point
    p = 0.0 if k == 0 else float(rng.uniform(0.05, 0.6))
    rounds = _rounds(rng, k, p)
    accepted, drafted = sum(rounds), k * len(rounds)
    fastpath = 0 if regime == "uncached" else sum(1 for a in rounds if a == 0) if k else 0
    steps = len(rounds) + (1 if regime == "cached" else 0)
    wall_s = steps * (0.03 if regime == "cached" else 0.06) * (1 + 0.03 * k)
    power_w = float(rng.uniform(150, 220))
    energy_j = power_w * wall_s
    pick = int(rng.integers(len(pool.texts)))
    return dict(
        cell_id=cell_id,
        experiment_id=exp_id,
        strategy=strategy,
        draft=draft,
        task=task,
        prompt_index=prompt,
        k=k,
        regime=regime,
        n_prompt_tokens=60,
        n_tokens=N_TOKENS,
        steps=steps,
        drafted=drafted,
        accepted=accepted,
        acceptance=accepted / drafted if drafted else None,
        mal=accepted / steps,
        accept_hist=[rounds.count(j) for j in range(k + 1)],
        accepted_per_step=rounds,
        tokens_per_step=[a + 1 for a in rounds],
        fastpath_rejects=fastpath,
        rounds=len(rounds),
        first_accepted=len(rounds) - rounds.count(0),
        wall_s=wall_s,
        draft_s=0.01 * wall_s,
        verify_s=0.99 * wall_s,
        tokens_per_s=N_TOKENS / wall_s,
        started_at=t_s,
        ended_at=t_s + wall_s,
        energy_j=energy_j,
        mean_power_w=power_w,
        j_per_100_tokens=energy_j / N_TOKENS * 100,
        tokens_per_j=N_TOKENS / energy_j,
        power_source="nvml" if with_samples else "estimate",
        power_measured=with_samples,
        rouge_l=float(rng.uniform(0.95, 1.0)),
        exact_match=bool(rng.random() < 0.9),
        bridged=False,
        stopped="max_new_tokens",
        device="generated",
        tokens=pool.tokens[pick],
        text=pool.texts[pick],
    )


SAMPLE_COLUMNS = ("experiment_id", "t_s", "source", "power_w", "energy_j", "measured")


def _samples(exp_id: int, gen: dict, rng: np.random.Generator) -> list[tuple]:
    """10 Hz samples over the generation's window, as SAMPLE_COLUMNS tuples."""
    n = max(1, int(gen["wall_s"] * SAMPLE_HZ))
    ts = (gen["started_at"] + np.arange(n) / SAMPLE_HZ).tolist()
    watts = (gen["mean_power_w"] + rng.uniform(-3, 3, size=n)).tolist()
    return [(exp_id, t, "nvml", w, None, True) for t, w in zip(ts, watts)]


def _insert(conn, table: str, names, values: list[tuple]) -> None:
    """executemany through the driver: several times faster than Core or the ORM for 10^5+ rows."""
    marks = ", ".join("?" if conn.dialect.paramstyle == "qmark" else "%s" for _ in names)
    conn.exec_driver_sql(f'INSERT INTO "{table}" ({", ".join(names)}) VALUES ({marks})', values)


def _json(value) -> str:
    """`json.dumps(value)`, byte for byte; this module's lists (of ints only) without the encoder's overhead."""
    if type(value) is list and (not value or type(value[0]) is int):
        return "[" + ", ".join(map(str, value)) + "]"
    return json.dumps(value)


def _flush(conn, table, rows: list) -> None:
    """Insert and clear `rows`: dicts (lists and dicts among their values are JSON-encoded) or SAMPLE_COLUMNS tuples."""
    if not rows:
        return
    if isinstance(rows[0], tuple):
        _insert(conn, table.name, SAMPLE_COLUMNS, rows)
    else:
        # every row of a table has the same keys and a list or dict in the same columns: find them once
        encoded = [i for i, v in enumerate(rows[0].values()) if isinstance(v, (list, dict))]
        values = []
        for r in rows:
            row = list(r.values())
            for i in encoded:
                row[i] = _json(row[i])
            values.append(tuple(row))
        _insert(conn, table.name, list(rows[0]), values)
    rows.clear()


def _bulk_pragmas(conn) -> None:
    """SQLite settings for a one-off bulk write: no fsync (a crash mid-build only loses the file being generated)
    and a page cache large enough for the rows' B-trees (256 MB)."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA synchronous=OFF")
        conn.exec_driver_sql("PRAGMA cache_size=-262144")  # KiB


def _flush_all(conn, cells: list, gens: list, power: list) -> int:
    """Write (and empty) the pending cells, generations and power samples; how many samples were written."""
    written = len(power)
    for table, rows in ((Cell.__table__, cells), (Generation.__table__, gens), (PowerSample.__table__, power)):
        _flush(conn, table, rows)
    return written


def generate(url: str, n: int, seed: int = 0) -> Generated:
    """Create the schema at `url` and write one experiment of `n` generations (see the module doc)."""
    engine, _ = open_db(url)
    rng = np.random.default_rng(seed)
    pool = make_pool(rng)
    points = grid()
    prompts = math.ceil(n / len(points))
    written = samples = 0
    with engine.connect() as conn, conn.begin():
        _bulk_pragmas(conn)
        exp_id = conn.execute(
            Experiment.__table__.insert().values(
                name=EXPERIMENT, spec_toml=SPEC_TOML, spec_hash=_key(SPEC_TOML), device="generated"
            )
        ).inserted_primary_key[0]
        _references(conn, exp_id, prompts, rng)
        cell_id = _next_id(conn)
        cells, gens, power = [], [], []
        t_s = T0_S
        for prompt in range(prompts):
            for point in points:
                if written == n:
                    break
                cells.append(
                    dict(
                        id=cell_id,
                        experiment_id=exp_id,
                        key=_key("sweep", *point, prompt),
                        kind="sweep",
                        state="done",
                        strategy=point[0],
                        draft=point[1],
                        task=point[2],
                        prompt_index=prompt,
                        k=point[3],
                        regime=point[4],
                        params={},
                        attempts=1,
                        created_at=CREATED,
                    )
                )
                gen = _generation(rng, pool, exp_id, cell_id, point, prompt, t_s, written % 4 == 0)
                gens.append(gen)
                if written % 4 == 0:
                    power.extend(_samples(exp_id, gen, rng))
                t_s = gen["ended_at"] + 0.05
                cell_id += 1
                written += 1
                if len(gens) >= CHUNK:
                    samples += _flush_all(conn, cells, gens, power)
        samples += _flush_all(conn, cells, gens, power)
    engine.dispose()
    return Generated(written, prompts, samples)


def end_run(url: str) -> float:
    """Store the generated experiment's summaries as a run's end does; the seconds it took."""
    import time

    from orchestrator.run.summaries import keep_summaries

    engine, Session = open_db(url)
    t0 = time.perf_counter()
    with Session() as s:
        exp_id = s.query(Experiment.id).filter(Experiment.name == EXPERIMENT).scalar()
    keep_summaries(Session, exp_id)
    engine.dispose()
    return time.perf_counter() - t0


def _next_id(conn) -> int:
    from sqlalchemy import func, select

    return int(conn.execute(select(func.max(Cell.id))).scalar() or 0) + 1


def _references(conn, exp_id: int, prompts: int, rng: np.random.Generator) -> None:
    """A reference cell and continuation per task x prompt."""
    cell_id = _next_id(conn)
    cells, refs = [], []
    for task in TASKS:
        for prompt in range(prompts):
            cells.append(
                dict(
                    id=cell_id,
                    experiment_id=exp_id,
                    key=_key("ref", task, prompt),
                    kind="reference",
                    state="done",
                    task=task,
                    prompt_index=prompt,
                    params={},
                    attempts=1,
                    created_at=CREATED,
                )
            )
            words = rng.choice(len(WORDS), size=80)
            refs.append(
                dict(
                    cell_id=cell_id,
                    experiment_id=exp_id,
                    task=task,
                    prompt_index=prompt,
                    prompt_text=f"prompt {prompt} of {task}",
                    prompt_tokens=[1, 2, 3],
                    tokens=rng.integers(3, 32000, size=N_TOKENS).tolist(),
                    text=" ".join(WORDS[i] for i in words),
                    wall_s=1.0,
                )
            )
            cell_id += 1
    _flush(conn, Cell.__table__, cells)
    _flush(conn, Reference.__table__, refs)
