"""A run's first step: every name its spec uses found, then the built-in `demo:` inputs made.

The spec arrives with its local paths absolute (`orchestrator.run.spec_paths.load_spec`). Its model names are
resolved without loading weights (`orchestrator.run.model_names`: a misspelt one is refused before a `demo:` model
trains), its local files and `demo:` names found (`orchestrator.run.spec_paths.check_paths`), and only then are the
`demo:` corpora and models built and their names swapped for their paths (`orchestrator.run.inputs`). What stands
behind the names is checked next (`orchestrator.run.input_checks`).

Example:
    >>> spec = resolve(load_spec("examples/demo.toml"))   # every demo: name now a path in the cache
"""

from __future__ import annotations

from orchestrator.run.inputs import build_builtins
from orchestrator.run.model_names import check_model_names
from orchestrator.run.spec import Spec
from orchestrator.run.spec_paths import check_paths


def resolve(spec: Spec, models: bool = True) -> Spec:
    """The spec with every name it uses found and every `demo:` name a real path (built-in models left as names
    when `models` is false: `validate`'s cheap pass); a name not found is refused in one line before anything is
    built."""
    check_model_names(spec)  # a misspelt model is refused before a demo: model trains
    check_paths(spec)  # so is a missing local file or an unknown demo: name
    return build_builtins(spec, models=models)
