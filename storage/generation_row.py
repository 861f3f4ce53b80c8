"""A generation's stored row from its `workers.contracts.GenerationRecord`: one mapping by field name, and the same
row as the driver inserts it, its values in one column order with the JSON already encoded (`generation_rows`).

Every field of the record's `Decoded` (`DECODED_COLUMNS`: tokens, rounds, times) and of the record itself
(`RECORD_COLUMNS`) is a `generations` column of the same name, but `energy`, which is stored as its `EnergyRecord`'s
fields (`ENERGY_COLUMNS`, again by name): these lists are the dataclasses' fields, typed nowhere else. The other
columns are the cell's (`FROM_CELL`), the figures `storage.results.store_generation` computes (`COMPUTED`) and what
the table fills in itself (`DEFAULTED`); `tests/storage/test_store.py` checks that these cover the table, each column
once.

A replay task builds its cells' rows where it replays them (`generation_rows`: their metrics against the reference
it replayed, and the round-cost table's prediction), so the driver only inserts them (`storage.results.insert_rows`):
the per-cell work scales out with the CPU workers, and the one driver of a cluster stays off it.

Example:
    >>> row = record_columns(record)            # {"n_prompt_tokens": 4, "tokens": [5, 6, 7], ..., "energy_j": 2.0}
    >>> Generation(**row, cell_id=cell.id, ...)
    >>> values = generation_rows(exp_id, [(RowCell.of(cell), record, reference_tokens)], predictor)[0]
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import JSON

from storage.batch_sql import json_text
from storage.models import Generation
from workers.contracts import EnergyRecord, GenerationRecord
from workers.decoding.records import Decoded
from workers.metrics import acceptance_rate, mal, rouge_l, tokens_per_s

if TYPE_CHECKING:
    from storage.cell_spec import CellSpec
    from storage.repredict import Predictor

EXPANDED = ("decoded", "energy")  # record fields stored as several columns (their dataclasses' fields)
DECODED_COLUMNS = tuple(f.name for f in fields(Decoded))
RECORD_COLUMNS = tuple(f.name for f in fields(GenerationRecord) if f.name not in EXPANDED)
ENERGY_COLUMNS = tuple(f.name for f in fields(EnergyRecord))
# the columns a record does not carry: its cell's coordinates and sampler, the figures computed from the record and
# the prompt's reference, and the id and the round count the table sets at insert (`storage.models._rounds`)
FROM_CELL = (
    "cell_id",
    "experiment_id",
    "strategy",
    "draft",
    "task",
    "prompt_index",
    "prompt_key",
    "k",
    "regime",
    "temperature",
    "top_k",
    "top_p",
)
COMPUTED = ("n_tokens", "acceptance", "mal", "tokens_per_s", "rouge_l", "exact_match")
DEFAULTED = ("id", "rounds")
EMPTY_AS_NULL = ("passes", "drafted_per_step")  # an empty per-pass or per-round record is stored as NULL, as before


NESTED = ("passes",)  # tuples of tuples; every other sequence field is flat


def _stored(name: str, value: Any) -> Any:
    """A record's value as a JSON column holds it: tuples as lists (a nested field's inner ones too), the rest as it
    is (by field, not by recursion: the driver stores 10^5-10^6 rows)."""
    if type(value) is not tuple:
        return value
    return [list(v) for v in value] if name in NESTED else list(value)


def record_columns(g: GenerationRecord) -> dict[str, Any]:
    """The `generations` columns a record fills, by field name: its `Decoded`'s, its own and its energy's (None
    without one). A record without `first_accepted` leaves it to the table (rounds - accept_hist[0],
    `storage.models`)."""
    row = {name: _stored(name, getattr(g.decoded, name)) for name in DECODED_COLUMNS}
    row |= {name: _stored(name, getattr(g, name)) for name in RECORD_COLUMNS}
    row |= {name: None if g.energy is None else getattr(g.energy, name) for name in ENERGY_COLUMNS}
    row |= {name: row[name] or None for name in EMPTY_AS_NULL}
    row["wall_s_runs"] = row["wall_s_runs"] or [g.wall_s]  # one timed run: its own wall time
    if row["first_accepted"] is None:
        del row["first_accepted"]
    return row


class RowCell(NamedTuple):
    """What a generation's row takes from its cell: its id and coordinates, its prompt's reference key, its sampler,
    and whether its rounds verify token trees (which rows of the round-cost table predict it)."""

    id: int
    strategy: str
    draft: str
    task: str
    prompt_index: int
    prompt_key: str | None  # the key of its prompt's reference cell (`orchestrator.run.prepare`)
    k: int
    regime: str | None
    temperature: float
    top_k: int
    top_p: float
    tree: bool

    @classmethod
    def of(cls, c: CellSpec) -> RowCell:
        p = c.params
        tree = bool(p.options.get("tree"))
        return cls(
            c.id,
            c.strategy,
            c.draft,
            c.task,
            c.prompt_index,
            p.reference,
            c.k,
            c.regime,
            c.temperature or 0.0,
            p.top_k,
            p.top_p,
            tree,
        )


def _mal(g: GenerationRecord) -> float | None:
    """MAL over the generation's rounds (`workers.metrics.mal`); none without a round."""
    return mal(g.accepted, len(g.accepted_per_step)) if g.accepted_per_step else None


def generation_row(exp_id: int, cell: RowCell, g: GenerationRecord, ref: list[int] | None) -> dict[str, Any]:
    """The `generations` row of a record: its own columns, its cell's coordinates and its metrics; ROUGE-L and exact
    match against its prompt's reference `ref` (None: not made yet, no quality figures)."""
    tokens, n = list(g.tokens), len(g.tokens)
    greedy = not cell.temperature  # a sampled text is not meant to equal the greedy reference: no quality figures
    return {
        **record_columns(g),
        "cell_id": cell.id,
        "experiment_id": exp_id,
        "strategy": cell.strategy,
        "draft": cell.draft,
        "task": cell.task,
        "prompt_index": cell.prompt_index,
        "prompt_key": cell.prompt_key,
        "k": cell.k,
        "regime": cell.regime,
        "temperature": cell.temperature,
        "top_k": cell.top_k,
        "top_p": cell.top_p,
        "n_tokens": n,
        "acceptance": acceptance_rate(g.accepted, g.drafted) if g.drafted else None,
        "mal": _mal(g),
        "tokens_per_s": tokens_per_s(n, g.wall_s),
        "rouge_l": rouge_l(tokens, ref) if ref is not None and greedy else None,
        "exact_match": (tokens == list(ref)) if ref is not None and greedy else None,
    }


def generation_rows(
    exp_id: int, items: list[tuple[RowCell, GenerationRecord, list[int] | None]], predictor: Predictor | None
) -> list[tuple]:
    """Each (cell, record, its prompt's reference tokens) as `INSERT_COLUMNS` values (`encoded`); `predictor`, the
    run's round-cost table, sets a replayed row's time, speed and energy and a timed row's `predicted_wall_s` (as
    `storage.repredict.repredict_in_place` does to stored rows)."""
    out = []
    for c, g, ref in items:
        row = generation_row(exp_id, c, g, ref)
        if predictor is not None and c.regime is not None:
            new = predictor.columns(c.regime, g.passes, g.draft_s, row["n_tokens"], c.tree)
            row |= new if g.measure == "replay" else {"predicted_wall_s": new["predicted_wall_s"]}
        out.append(encoded(row))
    return out


# -- a row as the driver inserts it: every column in one order, its JSON pre-encoded (no per-row bind processing)
JSON_COLUMNS = frozenset(c.name for c in Generation.__table__.columns if isinstance(c.type, JSON))
INSERT_COLUMNS = tuple(c.name for c in Generation.__table__.columns if c.name != "id")
_JSON_AT = tuple(i for i, name in enumerate(INSERT_COLUMNS) if name in JSON_COLUMNS)
_TABLE_DEFAULTS = {
    c.name: c.default.arg for c in Generation.__table__.columns if c.default is not None and c.default.is_scalar
}


def encoded(row: dict[str, Any]) -> tuple:
    """A row (`record_columns` and its cell's and computed columns) as `INSERT_COLUMNS` values: the table's own
    defaults filled in (`rounds` and `first_accepted` as `storage.models` computes them at an ORM insert), the JSON
    columns encoded as the JSON type encodes them, so a row reads back the same whichever way it was written."""
    rounds = len(row.get("accepted_per_step") or ())
    values = _TABLE_DEFAULTS | row
    values["rounds"] = rounds
    if values.get("first_accepted") is None:
        values["first_accepted"] = rounds - int((row.get("accept_hist") or [0])[0])
    out = [values.get(name) for name in INSERT_COLUMNS]
    for i in _JSON_AT:  # None too: the JSON type stores it as the JSON null, not as SQL NULL
        out[i] = json_text(out[i])
    return tuple(out)


def decoded_lists(values: tuple, names: tuple[str, ...]) -> dict[str, Any]:
    """The JSON columns `names` of an `encoded` row, decoded (what a check of its rounds reads)."""
    at = {name: i for i, name in enumerate(INSERT_COLUMNS)}
    return {name: json.loads(values[at[name]]) for name in names}
