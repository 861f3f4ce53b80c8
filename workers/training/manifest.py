"""What an artifact was built from: `<artifact>.manifest.json` beside every instance base, datastore and suffix corpus.

A base trained on one machine's corpus must say which text it holds, so that a result read later (or elsewhere) can
be traced to its files. The worker that builds an artifact writes, next to the file and under the same name plus
`.manifest.json`:

- the artifact (file name, kind, sha256) and the tokenizer;
- the corpus: its spec identity (`TextSource.identity()`), the `max_tokens` cap, the tokens and documents read;
- each local corpus file's size and sha256 (the files training reads: `workers.corpora.local_files`);
- the corpus's provenance where it has one: a local corpus file `NAME-SPLIT.jsonl` whose folder holds
  `NAME-manifest.jsonl` (the built-in code corpus: `code-train.jsonl` beside `code-manifest.jsonl`, one row per
  source file with its split, distribution, version, path and sha256). Its rows of the corpus's split are copied
  whole, with the rule that makes a `max_tokens` prefix: the train file holds those files in the order of their
  sha256, read in that order until the cap.

The driver stores the manifest's path and sha256 with the artifact's row (`instance_bases.manifest_path` /
`manifest_sha256`; an `artifacts` row's `meta`). Written atomically; the same inputs give the same bytes.

Example:
    >>> path, digest = write_manifest("bases/code-1e6-ab12.igtree", kind="instance base", sha256=sha,
    ...     source=source, tokenizer="HuggingFaceTB/SmolLM2-135M-Instruct", max_tokens=10**6, tokens=10**6)
    >>> path
    'bases/code-1e6-ab12.igtree.manifest.json'
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from workers.corpora import TextSource, local_files
from workers.files import file_sha256

SUFFIX = ".manifest.json"
PROVENANCE_SUFFIX = "-manifest.jsonl"


def manifest_path(artifact: str | os.PathLike) -> Path:
    """Where an artifact's manifest goes: beside it, its name plus `.manifest.json`."""
    return Path(f"{os.fspath(artifact)}{SUFFIX}")


def provenance_file(source: TextSource) -> tuple[Path, str] | None:
    """(`NAME-manifest.jsonl`, SPLIT) for a local corpus file `NAME-SPLIT.jsonl` with that file beside it; else None."""
    if not source.path:
        return None
    path = Path(source.path)
    name, dash, split = path.stem.rpartition("-")
    candidate = path.with_name(f"{name}{PROVENANCE_SUFFIX}")
    return (candidate, split) if dash and name and candidate.is_file() else None


@functools.lru_cache(maxsize=256)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    """A file's sha256, once per (path, size, mtime) in a process: a worker that builds several bases of one corpus
    (the learning curve's sizes) hashes its 314 MB file once."""
    return file_sha256(path)


def _source_files(source: TextSource) -> list[dict[str, Any]]:
    if not source.path:
        return []
    rows = []
    for p in local_files(source):
        st = p.stat()
        rows.append({"path": str(p), "bytes": st.st_size, "sha256": _sha256(str(p), st.st_size, st.st_mtime_ns)})
    return rows


def _provenance(source: TextSource) -> dict[str, Any] | None:
    found = provenance_file(source)
    if found is None:
        return None
    path, split = found
    with open(path, encoding="utf-8") as fh:
        rows = [row for line in fh if line.strip() and (row := json.loads(line)).get("split") == split]
    groups = sorted({row.get("group", "") for row in rows})
    return {
        "file": str(path),
        "sha256": file_sha256(path),
        "split": split,
        "order": "the corpus file holds these files in the order of their sha256; max_tokens reads a prefix of it",
        "groups": len(groups),
        "files": rows,
    }


def manifest(
    artifact: str | os.PathLike,
    *,
    kind: str,
    sha256: str,
    source: TextSource,
    tokenizer: str,
    max_tokens: int | None,
    tokens: int | None,
    documents: int | None = None,
) -> dict[str, Any]:
    """The manifest of one artifact (see the module doc), as a dict."""
    return {
        "artifact": Path(artifact).name,
        "kind": kind,
        "sha256": sha256,
        "tokenizer": tokenizer,
        "corpus": {
            **source.identity(),
            "max_tokens": max_tokens,
            "tokens": tokens,
            "documents": documents,
        },
        "source_files": _source_files(source),
        "provenance": _provenance(source),
    }


def write_manifest(artifact: str | os.PathLike, **fields: Any) -> tuple[str, str]:
    """Write `manifest(artifact, **fields)` beside the artifact (atomically); (its path, its sha256)."""
    path = manifest_path(artifact)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(manifest(artifact, **fields), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return str(path), file_sha256(path)


def artifact_manifest(job, info) -> tuple[str, str]:
    """`write_manifest` for what a `build_task` built (`ArtifactJob`, `ArtifactInfo`): a distilled base is capped by
    the corpus entry's `label_max_tokens` (else its `max_tokens`), any other artifact by `max_tokens`."""
    options, meta = job.options or {}, info.meta or {}
    cap = options.get("max_tokens")
    if job.kind == "distill":
        cap = options.get("label_max_tokens") or cap
    return write_manifest(
        info.path,
        kind=info.kind,
        sha256=info.sha256,
        source=job.corpus,
        tokenizer=job.tokenizer,
        max_tokens=cap,
        tokens=meta.get("tokens"),
        documents=meta.get("docs"),
    )


def ibase_manifest(req, info) -> tuple[str, str]:
    """`write_manifest` for an instance base a training built (`IBaseRequest`, `IBaseInfo`)."""
    return write_manifest(
        info.path,
        kind="instance base",
        sha256=info.sha256,
        source=req.source,
        tokenizer=req.tokenizer,
        max_tokens=req.max_tokens,
        tokens=info.tokens,
    )
