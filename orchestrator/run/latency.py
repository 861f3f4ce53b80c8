"""A latency run of a spec (`greenspec latency SPEC`): which drafts and which contexts `workers.latency` times.

The paper's §2.3 protocol: single-token queries `propose(context, 1)` over 10 prompts x 5 repetitions. The
contexts are the spec's task prompts (round-robin over its tasks, encoded with the verifier's tokenizer). Each
draft is built as the sweep builds it. Olifant strategies are timed with the native IGTree engine and, beside it,
with TiMBL (`TimblIGTree`) on the same corpus; an instance base the run already trained is reused, otherwise it is
trained here, in-process, by the trainer's own code path (same file name, so a later run reuses it too). A
strategy that scores its guesses is timed on the native engine only, and the table says so under it
(`timbl_notes`).

Example:
    >>> name, rows = measure_spec_file("examples/demo.toml", LatencyOptions(prompts=10, repeats=5))
    >>> format_table(rows).splitlines()[0]
    '| strategy | draft | engine | queries | mean_us | median_us | p95_us |'
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

from orchestrator.run.inputs import materialize
from orchestrator.run.spec import Spec, StrategySection
from orchestrator.run.spec_paths import check_paths, load_spec
from storage.db import open_db
from storage.latency import store_latency
from workers.contracts import ArtifactJob
from workers.corpora.tasks import load_prompts
from workers.drafts import BuildContext, Draft, Requirement, build_draft
from workers.errors import CorpusError, GreenspecError
from workers.latency import LatencyOptions, LatencyRow, summarize_times, timbl_gap, time_proposals
from workers.models.tokenizer import load_tokenizer, tokenizer_id
from workers.training.artifacts import producer
from workers.training.builders import build
from workers.training.ibase import IBaseRequest, artifact_name, train_instance_base

logger = logging.getLogger(__name__)

DEFAULTS = LatencyOptions()  # the paper's 10 prompts x 5 repeats, TiMBL beside native, neural drafts on CPU


def task_prompts(task, want: int) -> tuple:
    """Up to `want` prompts of a spec task: more than its sweep uses when the source has them."""
    try:
        return load_prompts(task.source(), want, task.prompt_words, articles=task.articles).prompts
    except CorpusError:
        return load_prompts(task.source(), min(want, task.prompts), task.prompt_words, articles=task.articles).prompts


def prompt_contexts(spec: Spec, tokenizer, n: int) -> list[list[int]]:
    """The first `n` prompts taken round-robin over the spec's tasks, as verifier token ids."""
    per_task = -(-n // len(spec.tasks))  # ceil: enough from each task
    sets = [task_prompts(t, per_task) for t in spec.tasks]
    texts = [ps[i].text for i in range(per_task) for ps in sets if i < len(ps)][:n]
    return [list(tokenizer(text).input_ids) for text in texts]


def ibase_path(spec: Spec, corpus_name: str, backend: str) -> str:
    """The corpus's instance base for `backend`: the run's artifact when it exists, else trained here now."""
    corpus = spec.corpus(corpus_name)
    tok_name = spec.verifier.tokenizer or spec.verifier.model
    out_dir = Path(spec.experiment.artifacts)
    name = artifact_name(
        corpus.source(),
        tokenizer_id(load_tokenizer(tok_name)),
        window=corpus.window,
        backend=backend,
        order=corpus.order,
        max_tokens=corpus.max_tokens,
    )
    if (out_dir / name).is_file():
        return str(out_dir / name)
    logger.info("latency: training the %s instance base of corpus %s (none stored yet)", backend, corpus_name)
    info = train_instance_base(
        IBaseRequest(
            corpus.source(),
            tok_name,
            out_dir,
            window=corpus.window,
            backend=backend,
            order=corpus.order,
            max_tokens=corpus.max_tokens,
        )
    )
    return info.path


def artifact_path(spec: Spec, req: Requirement, backend: str | None) -> str:
    """The file a requirement names: an instance base (for `backend`), or another artifact built here now."""
    if req.artifact == "ibase":
        return ibase_path(spec, req.corpus, backend or spec.corpus(req.corpus).backend)

    corpus = spec.corpus(req.corpus)
    job = ArtifactJob(
        kind=producer(req.artifact, corpus.distilled).cell_kind,
        corpus=corpus.source(),
        tokenizer=spec.verifier.tokenizer or spec.verifier.model,
        out_dir=spec.experiment.artifacts,
        options=corpus.model_dump(exclude={"name"}),
    )
    return build(job).path


def timbl_notes(spec: Spec, opts: LatencyOptions) -> list[str]:
    """One line per strategy that `measure` times on the native engine only although TiMBL was asked for."""
    if not opts.timbl:
        return []
    out = []
    for s in spec.strategies:
        reqs = s.options.requires() if s.entry.drafts else {}
        gap = timbl_gap(s.options.model_dump())
        if gap and any(r.artifact == "ibase" for r in reqs.values()):
            out.append(
                f"{s.name}: native engine only ({gap} scores guesses by match depth or node share, "
                "which TiMBL's lookups do not give)"
            )
    return out


def strategy_drafts(spec: Spec, s: StrategySection, tokenizer, opts: LatencyOptions) -> Iterator[tuple[str, Draft]]:
    """(engine, draft) pairs to time for one strategy, built as the sweep builds them; none for plain.

    A draft drafting from an instance base is timed with its corpus's backend and, with `opts.timbl`, with TiMBL
    (unless its options score guesses: `timbl_gap`).
    """
    if not s.entry.drafts:
        return
    reqs = s.options.requires()
    engines: list[str | None] = [None]
    if any(r.artifact == "ibase" for r in reqs.values()):
        timbl = opts.timbl and timbl_gap(s.options.model_dump()) is None
        engines = list(
            dict.fromkeys([spec.corpus(next(iter(reqs.values())).corpus).backend, *(["timbl"] if timbl else [])])
        )
    for engine in engines:
        artifacts = {role: artifact_path(spec, req, engine) for role, req in reqs.items()}
        ctx = BuildContext(tokenizer=tokenizer, device=opts.device, artifacts=artifacts)
        yield engine or s.draft, build_draft(s.draft, s.options.model_dump(), ctx)


def measure(spec: Spec, opts: LatencyOptions = DEFAULTS) -> list[LatencyRow]:
    """Time every non-plain strategy of a materialized spec; one row per strategy and engine."""
    if opts.prompts < 1 or opts.repeats < 1:
        raise GreenspecError(f"latency: --prompts and --repeats must be >= 1 (got {opts.prompts}, {opts.repeats})")
    tokenizer = load_tokenizer(spec.verifier.tokenizer or spec.verifier.model)
    contexts = prompt_contexts(spec, tokenizer, opts.prompts)
    rows = []
    for s in spec.strategies:
        for engine, draft in strategy_drafts(spec, s, tokenizer, opts):
            rows.append(summarize_times(s.name, s.draft, engine, time_proposals(draft, contexts, opts.repeats)))
            logger.info("latency %s (%s): %.1f us mean", s.name, engine, rows[-1].mean_us)
            del draft  # one draft in memory at a time, as the sweep loads them
    return rows


def load_latency_spec(path: str | Path) -> Spec:
    """Load a spec with its `demo:` inputs built and its paths checked."""
    spec = materialize(load_spec(path))
    check_paths(spec)
    return spec


def measure_spec_file(path: str | Path, opts: LatencyOptions = DEFAULTS) -> tuple[str, list[LatencyRow]]:
    """Load a spec (building `demo:` inputs if named) and time its strategies; (experiment name, rows)."""
    spec = load_latency_spec(path)
    return spec.experiment.name, measure(spec, opts)


def store_rows(db_url: str, experiment: str, rows: Sequence[LatencyRow], prompts: int, repeats: int) -> None:
    """Store the rows under the experiment's name (replacing earlier ones), migrating the database if needed."""

    _, Session = open_db(db_url)
    with Session() as s:
        store_latency(s, experiment, rows, prompts=prompts, repeats=repeats, host=socket.gethostname())
        s.commit()
