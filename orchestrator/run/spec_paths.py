"""A spec file loaded (`load_spec`, or a stored spec's text: `read_spec`) with its local paths made absolute beside
the spec file, and the check that every local file and `demo:` name a spec uses exists (before anything is built or
written).

Example:
    >>> spec = load_spec("examples/demo.toml")
    >>> check_paths(spec)    # SpecError naming the key of a local file that does not exist
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.run.spec import Spec, parse_spec
from orchestrator.run.spec_sections import (
    BUILTIN,
    BUILTIN_DATA,
    BUILTIN_MODELS,
    model_options,
    path_options,
    with_paths,
)
from workers.errors import SpecError
from workers.files import cache_dir


def _resolve(value: str | None, base: Path) -> str | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def _is_local(value: str, base: Path) -> bool:
    """A model/tokenizer value names a local path if it starts like one or exists beside the spec."""
    return value.startswith((".", "/", "~")) or (base / value).exists()


def resolve_paths(spec: Spec, base: Path) -> Spec:
    """Make local paths absolute relative to `base` (the spec's folder); hub ids and demo: names stay."""

    def local(v: str | None) -> str | None:
        return _resolve(v, base) if v and not v.startswith(BUILTIN) and _is_local(v, base) else v

    def data(v: str | None) -> str | None:
        return v if v is None or v.startswith(BUILTIN) else _resolve(v, base)

    return spec.model_copy(
        update={
            "experiment": spec.experiment.model_copy(
                update={"artifacts": _resolve(spec.experiment.artifacts, base) or str(_default_artifacts())}
            ),
            "verifier": spec.verifier.model_copy(
                update={"model": local(spec.verifier.model), "tokenizer": local(spec.verifier.tokenizer)}
            ),
            "corpora": [c.model_copy(update={"path": data(c.path)}) for c in spec.corpora],
            "tasks": [t.model_copy(update={"path": data(t.path)}) for t in spec.tasks],
            "strategies": [with_paths(s, local) for s in spec.strategies],
        }
    )


def _default_artifacts() -> Path:
    return cache_dir() / "artifacts"


def check_paths(spec: Spec) -> None:
    """Refuse local paths that do not exist (corpora, tasks, verifier, neural drafts), naming the key."""

    def missing(value: str | None) -> bool:
        return bool(value) and not value.startswith(BUILTIN) and value.startswith("/") and not Path(value).exists()

    for field in ("corpora", "tasks"):
        for i, item in enumerate(getattr(spec, field)):
            if item.path and item.path.startswith(BUILTIN) and item.path.removeprefix(BUILTIN) not in BUILTIN_DATA:
                raise SpecError(
                    f"{field}[{i}].path: unknown built-in source {item.path!r} "
                    f"(known: {', '.join(BUILTIN + n for n in BUILTIN_DATA)})"
                )
            if missing(item.path):
                raise SpecError(f"{field}[{i}].path: no such file or directory: {item.path}")
    for key in ("model", "tokenizer"):
        if missing(getattr(spec.verifier, key)):
            raise SpecError(f"verifier.{key}: no such file or directory: {getattr(spec.verifier, key)}")
    for s in spec.strategies:
        for key, value in path_options(s):
            if missing(value):
                raise SpecError(f"{key}: no such file or directory: {value}")
    for key, value in (
        ("verifier.model", spec.verifier.model),
        *(kv for s in spec.strategies for kv in model_options(s)),
    ):
        if value and value.startswith(BUILTIN) and value.removeprefix(BUILTIN) not in BUILTIN_MODELS:
            raise SpecError(
                f"{key}: unknown built-in model {value!r} (known: {', '.join(BUILTIN + m for m in BUILTIN_MODELS)})"
            )


def load_spec(path: str | Path) -> Spec:
    """Read, validate and resolve a spec file (relative local paths become absolute, next to the spec)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(f"{path}: cannot read spec ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise SpecError(
            f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start}); save the spec as UTF-8"
        ) from err
    return read_spec(text, str(path))


def read_spec(text: str, spec_path: str | None) -> Spec:
    """A spec's text parsed and its local paths made absolute beside `spec_path` (beside the working folder where
    there is none: a stored spec without its file)."""
    base = Path(spec_path).parent if spec_path else Path.cwd()
    return resolve_paths(parse_spec(text, spec_path or "<stored spec>"), base)
