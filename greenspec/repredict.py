"""`greenspec costs repredict`, `export --costs` and `report --costs`: an experiment's replayed generations
re-predicted with a stored cost table, as a derived experiment `<experiment>@<table>` (`storage.repredict`).

Everything is checked before anything is written, and a refusal is one line that changes nothing stored: an unknown
table or experiment, a table for another verifier (the model the table names against the experiment's spec, or the
verifier its own table names) or another vocabulary, an experiment without replayed generations (or with ones
stored without their passes), a table without the experiment's regimes, a derived experiment re-predicted again.
A derived experiment made before with the same table and the same replayed generations is reused; one whose source
has gained replays since is written again. A table whose reference check is below 100% (or was not run) says so
in the derived experiment's name and label, so every page that shows the name shows it.

Example:
    >>> done = repredict("sqlite:///greenspec.db", "demo", "smollm2-135m-cpu-1t-float32")
    >>> done.name, done.generations
    ('demo@smollm2-135m-cpu-1t-float32', 11040)
"""

from __future__ import annotations

from dataclasses import dataclass

from workers.errors import GreenspecError
from workers.portable_tables import CostTableError, table_label

NEEDED_KINDS = {"uncached": ("chain",), "cached": ("first", "chain"), "cached-standard": ("first", "chain")}


@dataclass(frozen=True)
class Repredicted:
    """A derived experiment: its name and label, the replayed generations it holds, the timed ones left behind."""

    name: str
    label: str
    source: str
    table: str
    generations: int
    timed_left: int
    reused: bool


@dataclass(frozen=True)
class _Plan:
    source_id: int
    source: str
    table_id: int
    name: str
    label: str
    generations: int
    timed_left: int
    existing_id: int | None  # a derived experiment of that name, to replace
    reuse: bool


def derived_name(source: str, table: str, agreement: float | None) -> str:
    """`<experiment>@<table>`, with the reference check where it is not a full agreement."""
    check = "" if agreement is not None and agreement >= 1.0 else " (agreement unchecked)"
    if agreement is not None and agreement < 1.0:
        check = f" (agreement {agreement:.1%})"
    return f"{source}@{table}{check}"


def _verifier_check(s, exp_id: int, name: str, row, table, facts: dict) -> None:
    """Refuse a table for another verifier or vocabulary than the experiment's."""
    from orchestrator.run.summaries import stored_spec

    spec = stored_spec(s, exp_id)
    ran = spec.verifier.model if spec is not None else None
    model = table.meta.get("model")
    same = (model is not None and ran is not None and str(model) == ran) or (
        facts["own_verifier"] is not None and table.verifier == facts["own_verifier"]
    )
    if not same:
        raise CostTableError(
            f"cost table {row.id} ({row.name}) is for verifier {str(model or table.verifier)!r}, experiment {name!r} "
            f"ran {ran or facts['own_verifier']!r}: a table predicts its own verifier's passes only"
        )
    vocab, known = table.meta.get("vocab_size"), {v for v in facts["vocab"] if v is not None}
    if vocab is not None and known and int(vocab) not in known:
        raise CostTableError(
            f"cost table {row.id} ({row.name}) has a vocabulary of {vocab} tokens, the references of experiment "
            f"{name!r} {', '.join(map(str, sorted(known)))}: another tokenizer"
        )


def _replay_check(name: str, row, table, facts: dict, count: int) -> None:
    """Refuse an experiment without replayed generations, with ones lacking passes, or regimes the table lacks."""
    if count == 0:
        raise CostTableError(
            f"experiment {name!r} has no replayed generations ({facts['timed']} timed): --costs re-predicts replayed "
            "cells only, and a timed generation keeps what it measured (run the spec with [sweep] replay = true)"
        )
    if facts["no_passes"]:
        raise CostTableError(
            f"experiment {name!r}: {facts['no_passes']} replayed generations have no recorded passes to re-predict; "
            "replay them again with this greenspec"
        )
    have = {tuple(n.split("/")[:2]) for n in table.rows}
    missing = sorted(
        f"{r} {k}" for r in facts["regimes"] for k in NEEDED_KINDS.get(r, ("chain",)) if (r, k) not in have
    )
    if missing:
        raise CostTableError(
            f"cost table {row.id} ({row.name}) has no {', '.join(missing)} passes, which experiment {name!r} "
            "replayed; measure it with every regime (`greenspec costs measure`)"
        )


def plan(s, experiment: str | None, table_ref: str, db: str) -> _Plan:
    """Every check, in one read session; what to write (or to reuse)."""
    from storage.cost_tables import (
        find_table,
        known_tables,
        replay_facts,
        replay_signature,
        reprediction_of,
        row_table,
    )
    from storage.queries import experiment_id, experiment_info

    row = find_table(s, table_ref)
    if row is None:
        raise CostTableError(f"no cost table {table_ref!r} in {db} (known: {known_tables(s)})")
    exp_id = experiment_id(s, experiment)
    if exp_id is None:
        raise GreenspecError(f"no experiment {experiment or '(newest)'!r} in {db}")
    name = experiment_info(s, exp_id)["name"]
    if (derived := reprediction_of(s, exp_id)) is not None:
        raise CostTableError(f"experiment {name!r} is itself a re-prediction ({derived.label}); re-predict its source")
    table, facts = row_table(row), replay_facts(s, exp_id)
    count, last = replay_signature(s, exp_id)
    _replay_check(name, row, table, facts, count)
    _verifier_check(s, exp_id, name, row, table, facts)
    target = derived_name(name, row.name, row.agreement)
    label = table_label(row.name, table, row.agreement)
    existing_id = experiment_id(s, target)
    reuse = False
    if existing_id is not None:
        found = reprediction_of(s, existing_id)
        if found is None or found.source_id != exp_id or found.cost_table_id != row.id:
            raise CostTableError(
                f"an experiment named {target!r} exists and is not {name!r} re-predicted with {row.name}"
            )
        reuse = (found.generations, found.source_last_id) == (count, last)
    return _Plan(exp_id, name, row.id, target, label, count, facts["timed"], existing_id, reuse)


def repredict(url: str, experiment: str | None, table_ref: str) -> Repredicted:
    """Re-predict `experiment` (the newest when None) with the stored table `table_ref` (id or name); see the module
    doc. One transaction: a failure leaves the database as it was."""
    from storage.cost_tables import row_table
    from storage.db import display_url, guard, open_db, open_reader
    from storage.models import CostTable
    from storage.repredict import Derivation, drop_derived, write_derived

    Reader = open_reader(url)
    if Reader is None:
        raise GreenspecError(f"{display_url(url)}: no results yet; start with `greenspec demo` or `greenspec run SPEC`")
    with Reader() as s:
        p = plan(s, experiment, table_ref, display_url(url))
    done = Repredicted(p.name, p.label, p.source, table_ref, p.generations, p.timed_left, p.reuse)
    if p.reuse:
        return done
    _, Writer = open_db(url, migrate=False)
    with guard(url, "re-predicting"), Writer() as s:
        if p.existing_id is not None:
            drop_derived(s, p.existing_id)
        row = s.get(CostTable, p.table_id)
        try:
            write_derived(s, Derivation(p.source_id, p.name, p.label, row, row_table(row)))
        except KeyError as err:  # a width or kind the table cannot predict: nothing was committed
            raise CostTableError(
                f"cost table {row.id} ({row.name}) cannot predict {p.source!r}: {err.args[0]}"
            ) from err
        s.commit()
    return done
