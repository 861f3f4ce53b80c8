"""Preparation before any write, one pass: resolve -> check -> expand (the driver then registers what it made).

Everything that can refuse bad input runs here, so a refused spec leaves the database untouched. `prepare` takes
each step once, in order, each in its own place:

1. resolve (`orchestrator.run.resolve`): every model name, local file and `demo:` name found, then the `demo:`
   corpora and models built and swapped for their paths;
2. check (`orchestrator.run.input_checks`): local corpora readable, local models with a config and weights, the
   verifier's context length against prompt_words + max_new_tokens + k;
3. expand (here, over `orchestrator.run.cells`): the tasks' prompts read, the grid's keys checked unique (cells that
   would collide on one key refused in one line) and the `Grid` returned, whose cells are made on each pass over it.

`validate_spec` is `greenspec validate`'s version of the same checks, with no built-in model trained.
"""

from __future__ import annotations

import logging

import numpy as np

from orchestrator.run.cells import (
    Grid,
    TaskPrompts,
    grid_digest,
    grid_keys,
    iter_cells,
    link_references,  # noqa: F401 (re-exported: the listed grid's linking)
)
from orchestrator.run.input_checks import check_inputs
from orchestrator.run.inputs import build_builtins
from orchestrator.run.model_names import check_model_names
from orchestrator.run.resolve import resolve
from orchestrator.run.spec import BUILTIN, Spec
from orchestrator.run.spec_paths import check_paths
from storage.cell_spec import CellSpec
from workers.corpora.tasks import load_prompts as read_prompts
from workers.errors import CorpusError, SpecError
from workers.training.artifacts import BY_CELL_KIND as ARTIFACT_KINDS

logger = logging.getLogger(__name__)


def prepare(spec: Spec, registered: str | None = None) -> tuple[Spec, list[TaskPrompts], Grid]:
    """The spec resolved, its inputs checked, its prompts read and the grid's keys checked unique (refusing a
    collision in one line); the grid itself is made when it is iterated. `registered`: the digest of the grid the
    experiment registered last (`Grid.digest`); where this grid's is the same, its keys were checked then, and are
    not expanded again."""
    spec = resolve(spec)
    check_inputs(spec)
    prompts = load_prompts(spec)
    digest = grid_digest(spec, prompts)
    if digest != registered:
        check_unique_keys(spec, prompts)
    return spec, prompts, Grid(spec, prompts, digest)


def validate_spec(spec: Spec) -> None:
    """`greenspec validate`: what `run` checks before any write (paths, corpora, models and their context, prompts,
    colliding cells), with built-in `demo:` data written (cheap) but no built-in model trained."""
    check_paths(spec)
    check_model_names(spec)
    check_grid(spec)
    spec = build_builtins(spec, models=False)
    check_inputs(spec)
    if all(t.path and not t.path.startswith(BUILTIN) for t in spec.tasks):
        check_unique_keys(spec, load_prompts(spec))


# ----------------------------------------------------------------------------- expand: prompts, unique keys


def load_prompts(spec: Spec) -> list[TaskPrompts]:
    """Every task's prompts, read before anything is stored; a prompt repeated within a task is used once."""
    out = []
    for i, t in enumerate(spec.tasks):
        try:
            ps = read_prompts(t.source(), t.prompts, t.prompt_words, articles=t.articles)
        except CorpusError as err:  # the key first, as every refusal of the spec names it
            raise CorpusError(f"tasks[{i}].{'path' if t.path else 'dataset'}: {err}") from err
        texts = tuple(dict.fromkeys(p.text for p in ps.prompts))  # same first prompt_words words: one prompt
        if len(texts) < len(ps.prompts):
            logger.warning(
                "task %s: %d prompts repeat an earlier one (same first %d words) and are used once",
                t.name,
                len(ps.prompts) - len(texts),
                t.prompt_words,
            )
        out.append(TaskPrompts(task=t.name, texts=texts, skipped_short=ps.skipped_short))
    return out


def _collision(a: CellSpec, b: CellSpec) -> str:
    """One line saying why two cells have the same key."""
    if a.kind in ARTIFACT_KINDS:
        return f"corpora {a.corpus!r} and {b.corpus!r} are the same source with the same options; keep one"
    if a.kind in ("sweep", "replay") and a.strategy != b.strategy:
        return (
            f"strategies {a.strategy!r} and {b.strategy!r} are the same draft with the same options "
            f"(k={a.k}, {a.regime}); change one's options or drop it"
        )
    words = " ".join((a.params.prompt or "").split()[:6])
    return (
        f"tasks {a.task!r} (prompt {a.prompt_index}) and {b.task!r} (prompt {b.prompt_index}) give the same "
        f"prompt ({words!r}...): two tasks read the same documents; keep one"
    )


def check_unique(cells: list[CellSpec]) -> None:
    """Refuse a grid in which two cells share one key (they would be one cell stored twice)."""
    seen: dict[str, CellSpec] = {}
    for c in cells:
        if c.key in seen:
            raise SpecError(f"duplicate cells: {_collision(seen[c.key], c)}")
        seen[c.key] = c


def check_unique_keys(spec: Spec, prompts: list[TaskPrompts]) -> None:
    """`check_unique` over the grid without holding its cells: 8 bytes a cell (its key's first 64 bits, from
    `grid_keys`), the cells made again only where two keys share those bits, to tell a true collision (refused with
    the same line) from two keys that only begin alike."""
    heads = np.sort(np.fromiter((int(key[:16], 16) for key in grid_keys(spec, prompts)), dtype=np.uint64))
    repeated = {int(h) for h in heads[1:][heads[1:] == heads[:-1]]}
    if repeated:
        check_unique([c for c in iter_cells(spec, prompts) if int(c.key[:16], 16) in repeated])


def check_grid(spec: Spec) -> None:
    """What `validate` can check without data or models: strategies or corpora that would collide."""
    stand_in = [TaskPrompts(task=t.name, texts=(f"<prompt of {t.name}>",)) for t in spec.tasks]
    check_unique_keys(spec, stand_in)
