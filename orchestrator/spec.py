"""The experiment spec (TOML): loaded once, validated, unknown keys refused by name.

Example:
    >>> spec = load_spec("examples/demo.toml")
    >>> spec.summary()
    'demo: 5 strategies x 2 tasks x k {3, 5, 8} x 2 regimes x 4 prompts = ...'

Relative paths in the spec are resolved against the spec file's folder.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from workers.corpora import TextSource
from workers.errors import SpecError

DRAFTS = ("plain", "ngram", "olifant", "neural")
REGIMES = ("uncached", "cached")
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")]
PositiveInt = Annotated[int, Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ExperimentSection(_Model):
    name: Name
    seed: int = 0
    artifacts: str | None = None        # where instance bases go (default: the greenspec cache); relative to the spec
    max_attempts: PositiveInt = 3       # a cell that fails this many times is marked failed
    overlap: bool = False               # allow training to run beside timed cells on one node
    batch_size: PositiveInt = 8         # sweep cells sent to the accelerator worker per call


class VerifierSection(_Model):
    model: Annotated[str, Field(min_length=1)]
    tokenizer: str | None = None        # default: the model's own
    revision: str | None = None
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    device: Literal["auto", "cuda", "mps", "cpu"] = "auto"


class _Source(_Model):
    name: Name
    path: str | None = None
    dataset: str | None = None
    config: str | None = None
    split: str = "train"
    column: str = "text"

    @model_validator(mode="after")
    def _one_source(self):
        if bool(self.path) == bool(self.dataset):
            raise ValueError("give exactly one of path or dataset")
        return self

    def source(self) -> TextSource:
        """The worker-side description of where the documents come from."""
        return TextSource(name=self.name, path=self.path, dataset=self.dataset, config=self.config,
                          split=self.split, column=self.column)


class CorpusSection(_Source):
    max_tokens: PositiveInt | None = None
    window: PositiveInt = 4
    backend: Literal["native", "timbl"] = "native"
    order: Literal["gain_ratio", "info_gain"] = "gain_ratio"
    shards: PositiveInt = 1
    memory_gb: Annotated[float, Field(gt=0)] | None = None  # bounds training memory (default: half of free memory)


class TaskSection(_Source):
    split: str = "test"
    prompts: PositiveInt = 100
    prompt_words: PositiveInt = 50


class StrategySection(_Model):
    name: Name
    draft: Literal["plain", "ngram", "olifant", "neural"]
    corpus: str | None = None           # olifant: a [[corpora]] name
    model: str | None = None            # neural: hub id or local path
    tokenizer: str | None = None        # neural: the draft's tokenizer when it differs from the verifier's
    n: PositiveInt = 4                  # ngram order
    unit: Literal["token", "word"] = "token"

    @model_validator(mode="after")
    def _options_fit_draft(self):
        if self.draft == "olifant" and not self.corpus:
            raise ValueError("an olifant strategy needs corpus = <a [[corpora]] name>")
        if self.draft == "neural" and not self.model:
            raise ValueError("a neural strategy needs model = <hub id or path>")
        if self.corpus and self.draft != "olifant":
            raise ValueError(f"corpus applies only to draft = \"olifant\", not {self.draft!r}")
        if self.model and self.draft != "neural":
            raise ValueError(f"model applies only to draft = \"neural\", not {self.draft!r}")
        return self


class SweepSection(_Model):
    k: Annotated[list[PositiveInt], Field(min_length=1)] = [3, 5, 8]
    regimes: Annotated[list[Literal["uncached", "cached"]], Field(min_length=1)] = ["uncached", "cached"]
    max_new_tokens: PositiveInt = 100
    warmup: bool = True

    @field_validator("k", "regimes")
    @classmethod
    def _unique(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"repeated values in {v}")
        return v


class PowerSection(_Model):
    sources: Annotated[list[Literal["auto", "nvml", "rapl", "powermetrics", "estimate"]], Field(min_length=1)] = ["auto"]
    hz: Annotated[float, Field(gt=0, le=1000)] = 10.0
    idle_baseline_s: Annotated[float, Field(ge=0)] = 0.0


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
        corpora = {c.name for c in self.corpora}
        for i, s in enumerate(self.strategies):
            if s.draft == "olifant" and s.corpus not in corpora:
                known = ", ".join(sorted(corpora)) or "none defined"
                raise ValueError(f"strategies[{i}] ({s.name}): corpus {s.corpus!r} is not a [[corpora]] name ({known})")
        return self

    def corpus(self, name: str) -> CorpusSection:
        """The [[corpora]] entry called `name`."""
        return next(c for c in self.corpora if c.name == name)

    def used_corpora(self) -> list[CorpusSection]:
        """Corpora that some olifant strategy drafts from (only these are trained)."""
        used = {s.corpus for s in self.strategies if s.draft == "olifant"}
        return [c for c in self.corpora if c.name in used]

    def cell_counts(self) -> dict[str, int]:
        """How many cells of each kind the grid expands into."""
        prompts = sum(t.prompts for t in self.tasks)
        regimes = len(self.sweep.regimes)
        per_k = sum(1 for s in self.strategies if s.draft != "plain")
        plain = sum(1 for s in self.strategies if s.draft == "plain")
        sweep = prompts * regimes * (per_k * len(self.sweep.k) + plain)
        return {"train": len(self.used_corpora()), "reference": prompts, "sweep": sweep}

    def summary(self) -> str:
        """One paragraph describing the grid."""
        n = self.cell_counts()
        prompts = sorted({t.prompts for t in self.tasks})
        prompt_txt = str(prompts[0]) if len(prompts) == 1 else f"{sum(t.prompts for t in self.tasks)} (total)"
        ks = ", ".join(map(str, self.sweep.k))
        strategies = ", ".join(f"{s.name} ({s.draft})" for s in self.strategies)
        return (
            f"{self.experiment.name}: {len(self.strategies)} strategies x {len(self.tasks)} tasks x k {{{ks}}} x "
            f"{len(self.sweep.regimes)} regimes x {prompt_txt} prompts = {n['sweep']} sweep cells "
            f"(plain runs once per prompt and regime), plus {n['reference']} greedy references and "
            f"{n['train']} instance bases to train. Verifier {self.verifier.model} on {self.verifier.device}, "
            f"{self.sweep.max_new_tokens} new tokens per generation; strategies: {strategies}; "
            f"tasks: {', '.join(t.name for t in self.tasks)}; power: {', '.join(self.power.sources)} at {self.power.hz:g} Hz."
        )


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("literal_error",) or str(part).startswith(("function-", "list[", "constrained-")):
            continue
        else:
            out += f".{part}" if out else str(part)
    return out


def _one_line(path: str, err: ValidationError) -> str:
    """The first validation error as one line: file, key, what is wrong, the value given."""
    first = err.errors(include_url=False)[0]
    loc = _loc(tuple(first["loc"]))
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        return f"{path}: unknown key {loc!r}"
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


def load_spec(path: str | Path) -> Spec:
    """Read, validate and resolve a spec file (relative local paths become absolute, next to the spec)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"{path}: cannot read spec ({err.strerror})") from err
    return resolve_paths(parse_spec(text, str(path)), path.parent)


def _resolve(value: str | None, base: Path) -> str | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


BUILTIN = "demo:"  # built-in offline sources and models, made on demand (see orchestrator.builtin)


def _is_local(value: str, base: Path) -> bool:
    """A model/tokenizer value names a local path if it starts like one or exists beside the spec."""
    return value.startswith((".", "/", "~")) or (base / value).exists()


def resolve_paths(spec: Spec, base: Path) -> Spec:
    """Make local paths absolute relative to `base` (the spec's folder); hub ids and demo: names stay."""
    def local(v: str | None) -> str | None:
        return _resolve(v, base) if v and not v.startswith(BUILTIN) and _is_local(v, base) else v

    def data(v: str | None) -> str | None:
        return v if v is None or v.startswith(BUILTIN) else _resolve(v, base)

    return spec.model_copy(update={
        "experiment": spec.experiment.model_copy(update={"artifacts": _resolve(spec.experiment.artifacts, base)
                                                          or str(_default_artifacts())}),
        "verifier": spec.verifier.model_copy(update={"model": local(spec.verifier.model),
                                                     "tokenizer": local(spec.verifier.tokenizer)}),
        "corpora": [c.model_copy(update={"path": data(c.path)}) for c in spec.corpora],
        "tasks": [t.model_copy(update={"path": data(t.path)}) for t in spec.tasks],
        "strategies": [s.model_copy(update={"model": local(s.model), "tokenizer": local(s.tokenizer)})
                       for s in spec.strategies],
    })


def spec_hash(text: str) -> str:
    """sha256 of the spec text, stored with the experiment."""
    return hashlib.sha256(text.encode()).hexdigest()


def _default_artifacts() -> Path:
    from workers.tokenizer import cache_dir

    return cache_dir() / "artifacts"


def check_paths(spec: Spec) -> None:
    """Refuse local paths that do not exist (corpora, tasks, verifier, neural drafts), naming the key."""
    def missing(value: str | None) -> bool:
        return bool(value) and not value.startswith(BUILTIN) and value.startswith("/") and not Path(value).exists()

    for field in ("corpora", "tasks"):
        for i, item in enumerate(getattr(spec, field)):
            if item.path and item.path.startswith(BUILTIN) and item.path.removeprefix(BUILTIN) not in BUILTIN_DATA:
                raise SpecError(f"{field}[{i}].path: unknown built-in source {item.path!r} "
                                f"(known: {', '.join(BUILTIN + n for n in BUILTIN_DATA)})")
            if missing(item.path):
                raise SpecError(f"{field}[{i}].path: no such file or directory: {item.path}")
    for key in ("model", "tokenizer"):
        if missing(getattr(spec.verifier, key)):
            raise SpecError(f"verifier.{key}: no such file or directory: {getattr(spec.verifier, key)}")
    for i, s in enumerate(spec.strategies):
        for key in ("model", "tokenizer"):
            if missing(getattr(s, key)):
                raise SpecError(f"strategies[{i}].{key}: no such file or directory: {getattr(s, key)}")
    for key, value in (("verifier.model", spec.verifier.model), *((f"strategies.{s.name}.model", s.model) for s in spec.strategies)):
        if value and value.startswith(BUILTIN) and value.removeprefix(BUILTIN) not in BUILTIN_MODELS:
            raise SpecError(f"{key}: unknown built-in model {value!r} (known: {', '.join(BUILTIN + m for m in BUILTIN_MODELS)})")


BUILTIN_MODELS = ("verifier", "draft")
BUILTIN_DATA = tuple(f"{d}-{part}" for d in ("shakespeare", "pydoc") for part in ("train", "test"))
