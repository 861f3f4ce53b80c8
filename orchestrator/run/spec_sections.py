"""The sections of an experiment spec (`[experiment]`, `[verifier]`, `[[corpora]]`, `[[tasks]]`, `[[strategies]]`,
`[sweep]`, `[power]`): strict pydantic models, unknown keys refused by name. `orchestrator.run.spec.Spec` holds them."""

from __future__ import annotations

import codecs
import dataclasses
import difflib
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator, model_validator

from workers.corpora import TextSource
from workers.drafts.registry import DraftEntry, DraftOptions, lookup
from workers.errors import DraftError
from workers.models.pretrained import BUILTIN_MODELS as PRETRAINED
from workers.models.pretrained import GGUF_SUFFIX, gguf_ref

Regime = Literal["uncached", "cached", "cached-standard"]  # workers.decoding.REGIMES
REGIMES: tuple[str, ...] = get_args(Regime)
Name = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")]
PositiveInt = Annotated[int, Field(gt=0)]
# Static upper bounds (a typo must not mean work that never ends); the verifier's context length bounds
# prompt_words + max_new_tokens + k further, checked in orchestrator.run.input_checks where its config is read.
MAX_K = 64
MAX_NEW_TOKENS = 32_768
MAX_PROMPTS = 100_000
MAX_PROMPT_WORDS = 10_000
KValue = Annotated[int, Field(gt=0, le=MAX_K)]
BUILTIN = "demo:"  # built-in offline sources and models, made on demand (see orchestrator.run.inputs)
# demo:verifier and demo:draft: the toy pair over the Mistral tokenizer (trained together, `greenspec demo --toy`);
# demo:draft-smollm2: the neural draft over smollm2-135m's vocabulary (trained alone, for the real verifier)
BUILTIN_MODELS = ("verifier", "draft", "draft-smollm2")
BUILTIN_DATA = tuple(f"{d}-{part}" for d in ("shakespeare", "pydoc", "legal", "code") for part in ("train", "test"))
PLAIN = "plain"  # the draft every speedup divides by (storage.summary.PLAIN)
AUTO_MAX_K = 8  # k = "auto" on a chain: the longest draft a round may choose (the cells' k column)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ExperimentSection(_Model):
    name: Name
    seed: int = 0
    artifacts: str | None = None  # where instance bases go (default: the greenspec cache); relative to the spec
    max_attempts: PositiveInt = 3  # a cell that fails this many times is marked failed
    overlap: bool = False  # allow training to run beside timed cells on one node
    batch_size: PositiveInt = 8  # sweep cells sent to the accelerator worker per call
    notes: Annotated[str, Field(max_length=2000)] = ""  # free text shown by status, the dashboard and the report
    tags: list[Annotated[str, Field(min_length=1, max_length=40)]] = []  # labels shown beside the name


class VerifierSection(_Model):
    model: Annotated[
        str, Field(min_length=1)
    ]  # a hub id, a local folder, "smollm2-135m" / "gemma3-270m", or a folder with gguf_file
    gguf_file: str | None = None  # a GGUF file in the `model` folder; folded into `model` as its path
    tokenizer: str | None = None  # default: the model's own
    revision: str | None = None
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    device: Literal["auto", "cuda", "mps", "cpu"] = "auto"
    threads: PositiveInt | None = None  # the accelerator worker's torch threads on CPU (default: every core, one
    # fewer with overlap); 1 for a tiny model on a shared machine

    @model_validator(mode="before")
    @classmethod
    def _fold_gguf(cls, data: Any) -> Any:
        """`model = FOLDER` + `gguf_file = NAME` becomes `model = FOLDER/NAME`: one string names the model everywhere."""
        if not isinstance(data, dict) or not data.get("gguf_file"):
            return data
        name, model = data["gguf_file"], data.get("model")
        if not isinstance(name, str) or not name.endswith(GGUF_SUFFIX) or "/" in name:
            raise ValueError(
                f"gguf_file {name!r} must be a file name ending in {GGUF_SUFFIX} (the folder goes in model)"
            )
        if not isinstance(model, str) or model in PRETRAINED or model.startswith(BUILTIN):
            raise ValueError(f"gguf_file needs model = the folder that holds {name}, not {model!r}")
        return {**{k: v for k, v in data.items() if k != "gguf_file"}, "model": gguf_ref(model, name)}


class _Source(_Model):
    """Where documents come from: `workers.corpora.TextSource`'s fields as spec keys, validated (a test holds the
    two to the same names and defaults)."""

    name: Name
    path: str | None = None
    dataset: str | None = None
    config: str | None = None
    split: str = "train"
    column: str = "text"
    encoding: str | None = None  # a local .txt/.jsonl file's text encoding (default: UTF-8, strictly)

    @field_validator("encoding")
    @classmethod
    def _known_codec(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            info = codecs.lookup(v)
        except LookupError:
            raise ValueError(
                f"unknown encoding {v!r}; give a Python codec name such as 'latin-1' or 'cp1252'"
            ) from None
        if not info._is_text_encoding:
            raise ValueError(f"{v!r} is not a text encoding")
        return v

    @model_validator(mode="after")
    def _one_source(self):
        if bool(self.path) == bool(self.dataset):
            raise ValueError("give exactly one of path or dataset")
        return self

    def source(self) -> TextSource:
        """The worker-side description of where the documents come from."""
        return TextSource(**{f.name: getattr(self, f.name) for f in dataclasses.fields(TextSource)})


class CorpusSection(_Source):
    max_tokens: PositiveInt | None = None
    window: PositiveInt = 4
    backend: Literal["native", "timbl"] = "native"
    order: Literal["gain_ratio", "info_gain"] = "gain_ratio"
    shards: PositiveInt = 1
    # bounds training memory (default: half of free memory); finite: `inf` would mean no bound, found only when training
    memory_gb: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    # "verifier": a distilled instance base, each target the verifier's greedy next token (a label cell on the
    # accelerator worker, then a distill cell on CPU); the label_* keys apply only then
    labels: Literal["corpus", "verifier"] = "corpus"
    label_max_tokens: PositiveInt | None = None  # tokens labelled and trained on (default: max_tokens)
    label_chunk_tokens: Annotated[int, Field(ge=8)] = 512  # window of one forward pass
    label_overlap_tokens: Annotated[int, Field(ge=0)] = 128  # context every labelled position sees at least

    @model_validator(mode="after")
    def _label_window(self):
        if self.label_overlap_tokens >= self.label_chunk_tokens - 1:
            raise ValueError(
                f"label_overlap_tokens={self.label_overlap_tokens} must be below "
                f"label_chunk_tokens - 1 ({self.label_chunk_tokens - 1})"
            )
        if self.labels == "verifier" and self.backend != "native":
            raise ValueError("labels = 'verifier' builds a native instance base; use backend = 'native'")
        return self

    @property
    def distilled(self) -> bool:
        """Whether this corpus's instance base is trained on verifier labels."""
        return self.labels == "verifier"

    def label_budget(self) -> int | None:
        """How many tokens are labelled (and trained on) for a distilled instance base."""
        return self.label_max_tokens or self.max_tokens


class TaskSection(_Source):
    split: str = "test"
    prompts: Annotated[int, Field(gt=0, le=MAX_PROMPTS)] = 100
    prompt_words: Annotated[int, Field(gt=0, le=MAX_PROMPT_WORDS)] = 50
    articles: bool | None = None  # group WikiText rows into articles (None: when the source is WikiText)


class StrategySection(_Model):
    """A `[[strategies]]` entry: `name`, `draft` (a registered draft), optional `k`, and the draft's own options."""

    name: Name
    draft: str
    k: Annotated[list[KValue], Field(min_length=1)] | None = None  # this strategy's k values (default: [sweep] k)
    tasks: Annotated[list[str], Field(min_length=1)] | None = None  # only these [[tasks]] (default: all)
    regimes: Annotated[list[Regime], Field(min_length=1)] | None = None  # only these [sweep] regimes (default: all)
    options: SerializeAsAny[DraftOptions]

    @model_validator(mode="before")
    @classmethod
    def _draft_options(cls, data: Any) -> Any:
        """Split the draft's own keys off and validate them with the draft's options model (the registry's)."""
        if not isinstance(data, dict) or not isinstance(data.get("draft"), str) or "options" in data:
            return data
        own = {key: data[key] for key in STRATEGY_KEYS if key in data}
        try:
            entry = lookup(data["draft"])
        except DraftError as err:
            raise ValueError(f".draft: {err}") from None  # `.key: ` extends the location in the one-line error
        mine = {key: v for key, v in data.items() if key not in own}
        auto = auto_k(data.get("k"), "auto" in mine)
        if auto:
            own.pop("k")
            mine["auto"] = True
        for key, what in (("tree", "tree = N"), ("auto", 'k = "auto"')):
            if key in mine and key not in entry.options.model_fields:
                raise ValueError(
                    f".{'k' if key == 'auto' else key}: {what} needs a draft with an instance base "
                    f"(olifant, hybrid), not {data['draft']!r}"
                )
        _refuse_unknown(data["draft"], entry, mine)
        try:
            options = entry.parse(mine)
        except DraftError as err:
            raise ValueError(str(err)) from None
        return {**own, "options": options}

    @model_validator(mode="after")
    def _k_drafts(self):
        if self.k is not None and not self.entry.drafts:
            raise ValueError(
                f"k = {self.k}: draft {self.draft!r} proposes nothing and runs once per prompt with k = 0; remove k"
            )
        if self.k is not None and self.tree is not None:
            raise ValueError(f"k = {self.k}: tree = {self.tree} is the budget of every pass (the k column); remove k")
        return self

    @property
    def tree(self) -> int | None:
        """The token-tree budget, or None for chains."""
        return getattr(self.options, "tree", None)

    @property
    def auto(self) -> bool:
        """Whether each round's length comes from the round-cost table (k = "auto")."""
        return bool(getattr(self.options, "auto", False))

    @property
    def replayable(self) -> bool:
        """Whether its greedy cells can be replayed: not when the draft's state outlives a generation."""
        return not getattr(self.options, "remember_outputs", False)

    @field_validator("k", "regimes")
    @classmethod
    def _unique_k(cls, v):
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"repeated values in {v}")
        return v

    @property
    def entry(self) -> DraftEntry:
        """The registry entry of this strategy's draft."""
        return lookup(self.draft)

    def runs_on(self, task: str) -> bool:
        """Whether this strategy runs on `task`."""
        return self.tasks is None or task in self.tasks

    def regimes_in(self, default: list[str]) -> list[str]:
        """The regimes this strategy runs in, in [sweep] order (default: all of them)."""
        return [r for r in default if self.regimes is None or r in self.regimes]

    def ks(self, default: list[int]) -> list[int]:
        """The k values this strategy runs at: [0] for a draft that proposes nothing; a tree's budget; AUTO_MAX_K
        (the longest a round may choose) for k = "auto" on chains."""
        if not self.entry.drafts:
            return [0]
        if self.tree is not None:
            return [self.tree]
        return [AUTO_MAX_K] if self.auto else (self.k or default)


STRATEGY_KEYS = ("name", "draft", "k", "tasks", "regimes")  # a strategy's own keys; the rest are its draft's


def with_paths(s: StrategySection, fn) -> StrategySection:
    """`s` with `fn` applied to each of its draft's path options."""
    opts = s.options
    update = {f: fn(getattr(opts, f)) for f in opts.path_fields}
    return s.model_copy(update={"options": opts.model_copy(update=update)}) if update else s


def path_options(s: StrategySection) -> list[tuple[str, str]]:
    """(key, value) of the strategy's set path options, keys as `strategies.NAME.OPTION`."""
    return [(f"strategies.{s.name}.{f}", v) for f in s.options.path_fields if (v := getattr(s.options, f))]


def model_options(s: StrategySection) -> list[tuple[str, str]]:
    """(key, value) of the strategy's set model options (checked loadable before any write)."""
    return [(f"strategies.{s.name}.{f}", v) for f in s.options.model_fields_ if (v := getattr(s.options, f))]


def _refuse_unknown(draft: str, entry: DraftEntry, keys: dict[str, Any]) -> None:
    """Name a key the draft does not take (and the one it was probably meant to be) before any missing key."""
    accepted = [*entry.options.model_fields]
    for key in keys:
        if key not in accepted:
            close = difflib.get_close_matches(key, [*accepted, *STRATEGY_KEYS], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f".{key}: unknown key for draft {draft!r}{hint} (accepted: {', '.join(accepted) or 'no options'})"
            )


def auto_k(k: Any, auto_key: bool) -> bool:
    """Whether a strategy's raw `k` asks for k = "auto"; refuse the spellings that mix it up."""
    if auto_key:
        raise ValueError('.auto: unknown key; write k = "auto"')
    if isinstance(k, list) and "auto" in k:
        raise ValueError(f'.k: k = "auto" chooses the length itself; give it alone, not in a grid (got {k!r})')
    if isinstance(k, str) and k != "auto":
        raise ValueError(f'.k: give a list of integers or "auto" (got {k!r})')
    return k == "auto"


class SweepSection(_Model):
    k: Annotated[list[KValue], Field(min_length=1)] = [3, 5, 8]
    regimes: Annotated[list[Regime], Field(min_length=1)] = ["uncached", "cached"]
    max_new_tokens: Annotated[int, Field(gt=0, le=MAX_NEW_TOKENS)] = 100
    warmup: bool = True
    repeats: Annotated[int, Field(ge=1, le=20)] = 1  # time each generation this many times, keep the fastest
    order: Literal["paired", "strategy"] = "paired"  # paired: every strategy of a prompt back to back (scheduler)
    temperatures: Annotated[list[Annotated[float, Field(ge=0, le=10)]], Field(min_length=1)] = [0.0]  # 0 = greedy
    top_k: Annotated[int, Field(ge=0)] = 0  # sampling: keep the k likeliest tokens (0 = all)
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0  # sampling: nucleus mass
    # replay every greedy cell from its prompt's reference on the CPU workers (workers.replay): exact passes and
    # acceptance, time and energy predicted by the measured round-cost table
    replay: bool = False
    # with replay: also time the first N prompts of every coordinate on the accelerator (validating the predictions);
    # default 0 with replay, every prompt without it
    timed_prompts: Annotated[int, Field(ge=0)] | None = None
    # with replay: time only this many of the greedy coordinates (strategy x task x k x regime), a sample seeded by
    # [experiment] seed; plain's are always timed (timed speedups need them); default all
    timed_coordinates: Annotated[int, Field(ge=0)] | None = None
    # with replay: this share of the timed greedy generations (a sample seeded by their keys) is timed twice, the
    # second time after every first timing of the run, so the run measures its own timing noise on identical passes
    # minutes apart (as a table and the timings it predicts are), per regime, beside the cost model's error
    timed_twice: Annotated[float, Field(ge=0, le=1)] = 0.5
    # with replay and timed cells: measure the round-cost table a second time among the timed cells (after the
    # replays) and predict every replay with it, so the table and the timings it is validated against share their
    # minutes and process; the first table still sets k = "auto"'s lengths
    table_at_timing: bool = True
    # ... in this many turns of one repeat each, spread evenly over the timed cells (each in the middle of its share
    # of them): a table's repeats minutes apart differ as a shared machine's speed does, so its repeats meet the same
    # spells of the machine as the timings they predict; the table is built from every turn so far
    table_turns: Annotated[int, Field(ge=1, le=20)] = 2

    def timed_runs(self, key: str, temperature: float) -> int | None:
        """How many times a timed cell's generation runs: twice for the `timed_twice` sample of a replayed run's
        greedy cells (the second after every first, `orchestrator.run.second_timings`), else the worker's `repeats`
        (None, each generation's runs back to back)."""
        if not self.replay or temperature > 0 or self.repeats > 1:
            return None
        return 2 if int(key[-4:], 16) / 0x10000 < self.timed_twice else None

    def timed(self, prompt_index: int, temperature: float) -> bool:
        """Whether a sweep cell of this prompt is timed on the accelerator (a sampled one always is)."""
        if not self.replay or temperature > 0:
            return self.timed_prompts is None or prompt_index < self.timed_prompts
        return prompt_index < (self.timed_prompts or 0)

    @field_validator("temperatures", mode="before")
    @classmethod
    def _floats(cls, v):
        return (
            [float(x) if isinstance(x, int) and not isinstance(x, bool) else x for x in v] if isinstance(v, list) else v
        )

    @field_validator("k", "regimes", "temperatures")
    @classmethod
    def _unique(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"repeated values in {v}")
        return v


class PowerSection(_Model):
    sources: Annotated[list[Literal["auto", "nvml", "rapl", "powermetrics", "estimate"]], Field(min_length=1)] = [
        "auto"
    ]
    hz: Annotated[float, Field(gt=0, le=1000)] = 10.0
    idle_baseline_s: Annotated[float, Field(ge=0)] = 0.0
