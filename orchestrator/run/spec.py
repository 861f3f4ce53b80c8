"""The experiment spec (TOML): parsed once, validated, unknown keys refused by name (its sections:
`orchestrator.run.spec_sections`; a spec file loaded with its paths resolved: `orchestrator.run.spec_paths.load_spec`).

Example:
    >>> spec = parse_spec(Path("examples/demo.toml").read_text(), "examples/demo.toml")
    >>> spec.summary()
    'demo: ... sweep cells (5 strategies over 2 tasks, k in {3, 5, 8}, 2 regimes, 4 prompts each; ...'

Relative paths in the spec are resolved against the spec file's folder by `load_spec`.
"""

from __future__ import annotations

import difflib
import hashlib
import tomllib
from typing import Annotated, get_args

from pydantic import BaseModel, Field, ValidationError, model_validator

from orchestrator.run.spec_sections import (  # noqa: F401 (re-exported: the spec's public names)
    AUTO_MAX_K,
    BUILTIN,
    MAX_K,
    MAX_NEW_TOKENS,
    MAX_PROMPT_WORDS,
    MAX_PROMPTS,
    PLAIN,
    REGIMES,
    STRATEGY_KEYS,
    CorpusSection,
    ExperimentSection,
    KValue,
    Name,
    PositiveInt,
    PowerSection,
    Regime,
    StrategySection,
    SweepSection,
    TaskSection,
    VerifierSection,
    _Model,
    _Source,
    auto_k,
)
from workers.drafts.registry import Requirement
from workers.errors import SpecError


class Spec(_Model):
    experiment: ExperimentSection
    verifier: VerifierSection
    corpora: list[CorpusSection] = []
    tasks: Annotated[list[TaskSection], Field(min_length=1)]
    strategies: Annotated[list[StrategySection], Field(min_length=1)]
    sweep: SweepSection = SweepSection()
    power: PowerSection = PowerSection()

    @model_validator(mode="after")
    def _cross_refs(self):
        for field in ("corpora", "tasks", "strategies"):
            names = [item.name for item in getattr(self, field)]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{field}: duplicate name {dup[0]!r}")
        corpora, tasks = {c.name for c in self.corpora}, {t.name for t in self.tasks}
        for i, s in enumerate(self.strategies):
            for name in sorted(set(s.tasks or ()) - tasks):
                raise ValueError(
                    f"strategies[{i}] ({s.name}): task {name!r} is not a [[tasks]] name ({', '.join(sorted(tasks))})"
                )
            for name in sorted(set(s.regimes or ()) - set(self.sweep.regimes)):  # plain must run where it runs
                raise ValueError(
                    f"strategies[{i}] ({s.name}): regime {name!r} is not in [sweep] regimes "
                    f"({', '.join(self.sweep.regimes)})"
                )
            for name in sorted(s.options.corpora() - corpora):
                known = ", ".join(sorted(corpora)) or "none defined"
                raise ValueError(f"strategies[{i}] ({s.name}): corpus {name!r} is not a [[corpora]] name ({known})")
            if s.tree is not None and any(t > 0 for t in self.sweep.temperatures):
                raise ValueError(
                    f"strategies[{i}] ({s.name}): token trees are greedy only; [sweep] temperatures "
                    f"{self.sweep.temperatures} must be [0.0]"
                )
            if self.sweep.repeats > 1 and s.options.carries_outputs():
                raise ValueError(
                    f"strategies[{i}] ({s.name}): [sweep] repeats = {self.sweep.repeats} cannot time a draft "
                    f"that remembers earlier outputs (a repeat would draft the text it just generated)"
                )
        self._plain_everywhere()
        return self

    def _plain_everywhere(self) -> None:
        """With a plain strategy in the spec, every task and regime a draft runs at has a plain run too: a speedup
        divides by the plain of its own task and regime, and a coordinate without one would have none."""
        plains = [s for s in self.strategies if s.draft == PLAIN]
        if not plains:
            return
        regimes = self.sweep.regimes
        for i, s in enumerate(self.strategies):
            for t, r in ((t.name, r) for t in self.tasks if s.runs_on(t.name) for r in s.regimes_in(regimes)):
                if s.draft != PLAIN and not any(p.runs_on(t) and r in p.regimes_in(regimes) for p in plains):
                    raise ValueError(
                        f"strategies[{i}] ({s.name}): runs on task {t!r} ({r}) where no plain strategy runs, so it "
                        f"would have no speedup; let {plains[0].name!r} run there too"
                    )

    def corpus(self, name: str) -> CorpusSection:
        """The [[corpora]] entry called `name`."""
        return next(c for c in self.corpora if c.name == name)

    def requirements(self) -> list[Requirement]:
        """The artifacts the strategies need built (each once), in spec order."""
        out: dict[Requirement, None] = {}
        for s in self.strategies:
            out.update(dict.fromkeys(s.options.requires().values()))
        return list(out)

    def used_corpora(self) -> list[CorpusSection]:
        """Corpora that some strategy needs an artifact from (only these are built)."""
        used = {r.corpus for r in self.requirements()}
        return [c for c in self.corpora if c.name in used]

    def cell_counts(self) -> dict[str, int]:
        """How many cells of each kind the grid expands into."""
        prompts = sum(t.prompts for t in self.tasks)
        sweep = sum(
            t.prompts * len(s.regimes_in(self.sweep.regimes)) * len(s.ks(self.sweep.k))
            for t in self.tasks
            for s in self.strategies
            if s.runs_on(t.name)
        ) * len(self.sweep.temperatures)
        labels = sum(self.corpus(r.corpus).distilled for r in self.requirements())
        counts = {"train": len(self.requirements()), "reference": prompts, "sweep": sweep}
        return counts | ({"label": labels} if labels else {})  # label cells only where a corpus is distilled

    def _replay_text(self) -> str:
        """What replay does to the sweep cells, for the summary."""
        sw = self.sweep
        if not sw.replay:
            return ""
        coords = "every coordinate" if sw.timed_coordinates is None else f"{sw.timed_coordinates} coordinates"
        timed = f"the first {sw.timed_prompts} prompt(s) of {coords} also timed" if sw.timed_prompts else "none timed"
        return f", each greedy one replayed on the CPU workers ({timed})"

    def summary(self) -> str:
        """One paragraph describing the grid: the true number of sweep cells, then what it is made of (no product:
        plain runs once per prompt and regime, and a strategy may have its own k, tasks and regimes)."""
        n = self.cell_counts()
        prompts = sorted({t.prompts for t in self.tasks})
        prompt_txt = (
            f"{prompts[0]} prompts each" if len(prompts) == 1 else f"{sum(t.prompts for t in self.tasks)} prompts"
        )
        ks = ", ".join(map(str, self.sweep.k))
        strategies = ", ".join(f"{s.name} ({s.draft})" for s in self.strategies)
        labels = f" ({n['label']} on verifier labels)" if n.get("label") else ""
        temps = f", {len(self.sweep.temperatures)} temperatures" if len(self.sweep.temperatures) > 1 else ""
        return (
            f"{self.experiment.name}: {n['sweep']} sweep cells{self._replay_text()} ({len(self.strategies)} strategies over "
            f"{len(self.tasks)} tasks, k in {{{ks}}}, {len(self.sweep.regimes)} regimes{temps}, {prompt_txt}; plain "
            f"runs once per prompt and regime), plus {n['reference']} greedy references and "
            f"{n['train']} instance bases to train{labels}. Verifier {self.verifier.model} on {self.verifier.device}, "
            f"{self.sweep.max_new_tokens} new tokens per generation; strategies: {strategies}; "
            f"tasks: {', '.join(t.name for t in self.tasks)}; power: {', '.join(self.power.sources)} at {self.power.hz:g} Hz."
        )


def _parts(loc: tuple) -> list:
    """An error location's keys and list indices, without pydantic's validator and type steps."""
    skip = ("function-", "list[", "constrained-")
    return [p for p in loc if isinstance(p, int) or not (p == "literal_error" or str(p).startswith(skip))]


def _loc(loc: tuple) -> str:
    out = ""
    for part in _parts(loc):
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out


def _section(annotation) -> type[BaseModel] | None:
    """The spec section inside a field's type (`X`, `list[X]`, `X | None`, `Annotated[...]`), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _section(arg)) is not None), None)


def _known_keys(loc: tuple) -> list[str]:
    """The keys accepted where the last key of `loc` was given, walking the spec's sections by name."""
    model: type[BaseModel] | None = Spec
    for part in _parts(loc)[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        model = _section(field.annotation) if field else None
        if model is None:
            return []
    return list(model.model_fields)


def _unknown_key(path: str, loc: tuple) -> str:
    """The line for a key no section takes, with the accepted key it is closest to."""
    close = difflib.get_close_matches(str(_parts(loc)[-1]), _known_keys(loc), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{path}: unknown key {_loc(loc)!r}{hint}"


def _one_line(path: str, err: ValidationError) -> str:
    """The first validation error as one line: file, key, what is wrong, the value given."""
    errors = err.errors(include_url=False)
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    if unknown and errors[0]["type"] == "missing":  # a misspelt section: its name, not the one it left missing
        return _unknown_key(path, tuple(unknown[0]["loc"]))
    first = errors[0]
    loc = _loc(tuple(first["loc"]))
    msg = first["msg"].removeprefix("Value error, ")
    if msg.startswith(".") and ": " in msg:  # a validator naming the key below its location
        sub, msg = msg.split(": ", 1)
        loc += sub
    if first["type"] == "extra_forbidden":
        return _unknown_key(path, tuple(first["loc"]))
    if first["type"] == "missing":
        return f"{path}: missing required key {loc!r}"
    value = first.get("input")
    shown = f" (got {value!r})" if value is not None and not isinstance(value, dict) else ""
    return f"{path}: {loc or 'spec'}: {msg}{shown}"


def parse_spec(text: str, path: str = "<spec>") -> Spec:
    """Parse and validate TOML text; raise SpecError with one line naming the key and value."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from err
    try:
        return Spec.model_validate(raw)
    except ValidationError as err:
        raise SpecError(_one_line(path, err)) from err


def parse_stored(spec: Spec | str | None) -> tuple[Spec | None, str]:
    """An experiment's stored spec (a Spec, or its TOML text) parsed, and ""; or None and why there is none (no
    spec, or one that does not parse: the findings say so)."""
    if spec is None or spec == "":
        return None, "the experiment stored no spec"
    if not isinstance(spec, str):
        return spec, ""
    try:
        return parse_spec(spec), ""
    except SpecError as err:
        return None, f"its stored spec does not parse ({str(err).splitlines()[0][:160]})"


def spec_hash(text: str) -> str:
    """sha256 of the spec text, stored with the experiment."""
    return hashlib.sha256(text.encode()).hexdigest()
