"""The draft registry: each draft module declares its name, options, requirements and builder in one `ENTRY`.

A draft module under `workers/drafts/` defines:
- an options model (`DraftOptions` subclass): the `[[strategies]]` keys it accepts besides `name`, `draft`
  and `k`, validated strictly (unknown keys are refused by name);
- `requires()` on that model: the artifacts that must be built before it can run (an instance base, a
  datastore), each from a `[[corpora]]` entry;
- a `build(options, ctx)` function that makes the draft on the accelerator worker;
- `ENTRY = DraftEntry(name, options, build)`, listed once in `MODULES` below.

Everything else (spec validation, cell keys, dependencies, the worker) asks the registry; no file outside
`workers/drafts/` compares a draft name other than `plain`.

Example:
    >>> entry = lookup("ngram")
    >>> opts = entry.parse({"n": 3})
    >>> opts.identity()
    {'n': 3, 'unit': 'token'}
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from workers.errors import DraftError

# One line per draft: the module under workers/drafts/ that defines its ENTRY.
MODULES = ("plain", "ngram", "olifant", "neural", "ngram_paper", "prompt_lookup", "suffix", "rest", "hybrid")


@dataclass(frozen=True)
class Requirement:
    """An artifact a draft needs built first: `artifact` ("ibase", "datastore", ...) from `corpus`."""

    artifact: str
    corpus: str


@dataclass(frozen=True)
class BuildContext:
    """What the worker gives a draft's builder: the verifier's tokenizer and device, and artifact paths by role."""

    tokenizer: Any = None
    device: Any = None
    artifacts: Mapping[str, str] = field(default_factory=dict)


class DraftOptions(BaseModel):
    """A strategy's draft options; strict, frozen, unknown keys refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path_fields: ClassVar[tuple[str, ...]] = ()  # options naming a local file, model or hub id (resolved, checked)
    model_fields_: ClassVar[tuple[str, ...]] = ()  # options naming a model to check loadable before any write
    corpus_fields: ClassVar[tuple[str, ...]] = ()  # options naming a [[corpora]] entry (replaced by its artifact key)

    def requires(self) -> dict[str, Requirement]:
        """Artifacts to build before this draft can run, by role (the key its builder reads in `ctx.artifacts`)."""
        return {}

    def identity(self) -> dict[str, Any]:
        """The option values that change the draft's proposals (they enter the cell key)."""
        return self.model_dump(exclude=set(self.corpus_fields))

    def carries_outputs(self) -> bool:
        """True when the draft keeps earlier generations' outputs (its proposals then depend on what ran before)."""
        return False

    def corpora(self) -> set[str]:
        """Corpus names this strategy refers to."""
        return {r.corpus for r in self.requires().values()}


@dataclass(frozen=True)
class DraftEntry:
    """One registered draft."""

    name: str
    cls: type  # the Draft class (`make_draft(name, **kwargs)` calls it with Python objects)
    options: type[DraftOptions]
    build: Callable[[DraftOptions, BuildContext], Any]
    drafts: bool = True  # False for plain: it runs once per prompt and regime with k = 0
    summary: str = ""
    parts: tuple[str, ...] = ()  # the drafts this one combines (its targets compare it with them)
    paper: str = ""  # the seed paper's name for the baseline this draft reproduces ("" if none)

    def parse(self, raw: Mapping[str, Any]) -> DraftOptions:
        """Validate `[[strategies]]` options; DraftError with one line naming the key on bad input."""
        try:
            return self.options.model_validate(dict(raw))
        except ValidationError as err:
            raise DraftError(f"draft {self.name!r}: {_first_error(err, self.options)}") from err


def _first_error(err: ValidationError, model: type[BaseModel]) -> str:
    first = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in first["loc"])
    accepted = ", ".join(model.model_fields) or "no options"
    if first["type"] == "extra_forbidden":
        return f"unknown key {loc!r} (accepted: {accepted})"
    if first["type"] == "missing":
        return f"missing required key {loc!r}"
    msg = first["msg"].removeprefix("Value error, ")
    value = first.get("input")
    shown = f" (got {value!r})" if value is not None and not isinstance(value, dict) else ""
    return f"{loc + ': ' if loc else ''}{msg}{shown}"


@cache
def registry() -> dict[str, DraftEntry]:
    """Every registered draft by name, in MODULES order."""
    out = {}
    for module in MODULES:
        entry = importlib.import_module(f"workers.drafts.{module}").ENTRY
        out[entry.name] = entry
    return out


def names() -> tuple[str, ...]:
    """The registered draft names."""
    return tuple(registry())


def lookup(name: str) -> DraftEntry:
    """The entry called `name`; DraftError listing the known drafts otherwise."""
    entry = registry().get(name)
    if entry is None:
        raise DraftError(f"unknown draft {name!r} (known: {', '.join(names())})")
    return entry
