"""A generation's stored row from its `workers.contracts.GenerationRecord`: one mapping by field name.

Every field of the record's `Decoded` (`DECODED_COLUMNS`: tokens, rounds, times) and of the record itself
(`RECORD_COLUMNS`) is a `generations` column of the same name, but `energy`, which is stored as its `EnergyRecord`'s
fields (`ENERGY_COLUMNS`, again by name): these lists are the dataclasses' fields, typed nowhere else. The other
columns are the cell's (`FROM_CELL`), the figures `storage.results.store_generation` computes (`COMPUTED`) and what
the table fills in itself (`DEFAULTED`); `tests/storage/test_store.py` checks that these cover the table, each column
once.

Example:
    >>> row = record_columns(record)            # {"n_prompt_tokens": 4, "tokens": [5, 6, 7], ..., "energy_j": 2.0}
    >>> Generation(**row, cell_id=cell.id, ...)
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from workers.contracts import EnergyRecord, GenerationRecord
from workers.decoding.records import Decoded

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
