"""The built-in code domain (`demo:code-train`, `demo:code-test`): the Python files of the installed distributions
(the running interpreter's `purelib`, the project's venv) and of the standard library, split by whole group.

- A *group* is a distribution (`dist:<name>`, its files read from its RECORD through `importlib.metadata`), a
  top-level folder of site-packages that no distribution owns (`site-packages:<top>`), or a top-level module of the
  standard library (`stdlib:<module>`; the stdlib's own `site-packages` is left out).
- Files over `MAX_FILE_BYTES` (generated tables), not valid UTF-8, or empty are skipped and counted.
- Exact duplicates (vendored copies such as `pip/_vendor/...`) are dropped by content sha256 *before* the split: one
  copy is kept, the one with the shortest path (fewest parts), then the first by (group, path).
- A group is held out for test when a hash of its name falls under `TEST_FRACTION` and it holds at most
  `MAX_TEST_GROUP_BYTES` of Python (the big packages carry the train set's volume). The rule reads one group alone,
  so a group is on the same side on every machine. No test file, nor any copy of one, is in train.
- `code-train.jsonl`: one JSON row (`{"text": ...}`) per train file, whole, in the order of the files' sha256 (a
  fixed shuffle, so that a `max_tokens` prefix is a sample of every group, not the alphabetically first ones).
- `code-test.jsonl`: the held-out files, in the order of their sha256 too (the first 100 prompts come from many
  groups), cut into documents at top-level `def`/`class`/decorator lines (a file's head,
  its docstring and imports, is left out), each MIN_DOC_WORDS..~MAX_DOC_WORDS words, so a 50-word prompt is code
  to complete. JSON rows delimit documents because code has blank lines of its own.
- `code-manifest.jsonl`: per kept file its split, group, version, path and sha256. The folder is named by a digest of
  the manifest (`demo-data/code-<digest>/`), so the path in a cell's key changes with the installed sources.

Files are read and written one at a time; what is held is a dict of per-file metadata (tens of thousands of rows).

Example:
    >>> code = write_code_corpus("demo-data")
    >>> code.train_path.name, code.test_path.name
    ('code-train.jsonl', 'code-test.jsonl')
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from orchestrator.run.demo_corpora import MAX_DOC_WORDS, MIN_DOC_WORDS, TARGET_DOC_WORDS
from workers.errors import CorpusError

logger = logging.getLogger(__name__)

MAX_FILE_BYTES = 1_000_000  # bigger .py files are generated tables (unicode data, test vectors), not code to learn
TEST_FRACTION = 0.1  # share of the groups (by name hash) held out
MAX_TEST_GROUP_BYTES = 4_000_000  # a bigger group always trains: transformers, torch, ... carry the train volume
SKIP_DIRS = frozenset({"__pycache__", "site-packages", "dist-packages"})
_STARTS = re.compile(r"(?:async\s+def|def|class)\b|@")  # a top-level statement a code prompt can start at


@dataclass(frozen=True)
class CodeFile:
    """One .py file: its group (see the module doc), version, path shown (`<root>/<relative>`) and location."""

    group: str
    version: str
    rel: str
    path: Path


@dataclass(frozen=True)
class CodeCorpus:
    """The code domain as written: files, and what went where (bytes and words as in the files' text)."""

    train_path: Path
    test_path: Path
    manifest_path: Path
    n_files_train: int
    n_files_test: int
    n_docs_test: int
    n_bytes_train: int
    n_words_train: int
    n_bytes_test: int
    n_words_test: int
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> files: too_large, not_utf8, empty, duplicate


def code_roots() -> list[tuple[str, Path]]:
    """The source trees: the running interpreter's site-packages (the venv's) and its standard library."""
    paths = sysconfig.get_paths()
    return [("site-packages", Path(paths["purelib"])), ("stdlib", Path(paths["stdlib"]))]


def write_code_corpus(directory: str | Path, roots: list[tuple[str, Path]] | None = None) -> CodeCorpus:
    """The code domain under `directory`, made once per set of installed sources (stamped like the demo domains)."""
    root, roots = Path(directory), roots or code_roots()
    root.mkdir(parents=True, exist_ok=True)
    stamp, fingerprint = root / ".code.stamp", source_fingerprint(roots)
    if (done := _stamped(stamp, fingerprint)) is not None:
        return done
    t0 = time.monotonic()
    corpus = build_code_corpus(root, roots)
    logger.info(
        "code corpus: %d train files (%d bytes, %d words), %d test files -> %d documents (%d words); skipped %s; %.0f s",
        corpus.n_files_train,
        corpus.n_bytes_train,
        corpus.n_words_train,
        corpus.n_files_test,
        corpus.n_docs_test,
        corpus.n_words_test,
        corpus.skipped,
        time.monotonic() - t0,
    )
    meta = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(corpus).items()}
    tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"fingerprint": fingerprint, **meta}))
    os.replace(tmp, stamp)
    return corpus


def source_fingerprint(roots: list[tuple[str, Path]]) -> str:
    """What the files are made from: every .py file's path, size and mtime, the interpreter and this module."""
    h = hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode())
    for label, top in roots:
        for path in _py_files(top):
            st = path.stat()
            h.update(f"{label}/{path.relative_to(top)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def _stamped(stamp: Path, fingerprint: str) -> CodeCorpus | None:
    """The corpus as written before, when its stamp names the same sources and its files are there."""
    try:
        meta = json.loads(stamp.read_text())
    except (OSError, ValueError):  # no stamp yet, or a torn one: build again
        return None
    paths = [Path(meta.get(k, "")) for k in ("train_path", "test_path", "manifest_path")]
    if meta.pop("fingerprint", None) != fingerprint or not all(p.is_file() for p in paths):
        return None
    return CodeCorpus(**{**meta, "train_path": paths[0], "test_path": paths[1], "manifest_path": paths[2]})


def _py_files(top: Path) -> Iterator[Path]:
    """The .py files under `top` in sorted order, caches and nested site-packages left out."""
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder, name)


def code_files(roots: list[tuple[str, Path]]) -> Iterator[CodeFile]:
    """Every .py file of the roots with its group: site-packages by distribution (else top-level folder), the
    standard library by top-level module."""
    for label, top in roots:
        owners = _owners(top) if label == "site-packages" else {}
        for path in _py_files(top):
            rel = path.relative_to(top)
            group, version = owners.get(path.resolve(), (f"{label}:{rel.parts[0].removesuffix('.py')}", ""))
            yield CodeFile(group, version, f"{label}/{rel.as_posix()}", path)


def _owners(top: Path) -> dict[Path, tuple[str, str]]:
    """Resolved file path -> (`dist:<name>`, version) from the RECORD of each distribution installed in `top`."""
    out: dict[Path, tuple[str, str]] = {}
    dists = sorted(importlib.metadata.distributions(path=[str(top)]), key=lambda d: d.metadata["Name"] or "")
    for dist in dists:
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"] or "unknown").lower()  # PEP 503 normalised
        for f in dist.files or []:
            if str(f).endswith(".py"):
                out.setdefault(Path(top, f).resolve(), (f"dist:{name}", dist.version or ""))
    return out


def scan(files: Iterator[CodeFile], skipped: Counter) -> dict[str, CodeFile]:
    """content sha256 -> the copy kept (see the module doc), counting in `skipped` what is left out and why."""
    kept: dict[str, CodeFile] = {}
    for f in files:
        if f.path.stat().st_size > MAX_FILE_BYTES:
            skipped["too_large"] += 1
            continue
        raw = f.path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            skipped["not_utf8"] += 1
            continue
        if not text.strip():
            skipped["empty"] += 1
            continue
        digest = hashlib.sha256(raw).hexdigest()
        if (other := kept.get(digest)) is not None:
            skipped["duplicate"] += 1
            f = min(f, other, key=lambda c: (len(Path(c.rel).parts), c.group, c.rel))
        kept[digest] = f
    return kept


def is_test_group(group: str, n_bytes: int, fraction: float | None = None) -> bool:
    """Whether a group is held out: its name's hash under `fraction` (None: TEST_FRACTION), and not a big group."""
    fraction = TEST_FRACTION if fraction is None else fraction
    unit = int.from_bytes(hashlib.sha256(f"code-split:{group}".encode()).digest()[:8], "big") / 2**64
    return unit < fraction and n_bytes <= MAX_TEST_GROUP_BYTES


def code_chunks(text: str) -> list[str]:
    """A held-out file's test documents: its top-level `def`/`class`/decorated blocks (the head before the first
    one left out), gathered to >= TARGET_DOC_WORDS words; a longer block is cut at line boundaries. A file with no
    top-level def or class (a script, a table of constants) gives none."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if _STARTS.match(ln) and not (i and lines[i - 1].startswith("@"))]
    if not starts:
        return []
    blocks = [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    docs: list[list[str]] = []
    current: list[str] = []
    for piece in (p for block in blocks for p in _pieces(block)):
        current.extend(piece)
        if _words(current) >= TARGET_DOC_WORDS:
            docs.append(current)
            current = []
    if current and (_words(current) >= MIN_DOC_WORDS or not docs):
        docs.append(current)
    elif current:  # a short tail joins the previous document rather than being lost
        docs[-1].extend(current)
    return [d for d in ("\n".join(doc).strip() for doc in docs) if len(d.split()) >= MIN_DOC_WORDS]


def _pieces(block: list[str]) -> Iterator[list[str]]:
    """A block cut at line boundaries into pieces of at most MAX_DOC_WORDS words."""
    piece: list[str] = []
    for line in block:
        if piece and _words(piece) + len(line.split()) > MAX_DOC_WORDS:
            yield piece
            piece = []
        piece.append(line)
    if piece:
        yield piece


def _words(lines: list[str]) -> int:
    return sum(len(ln.split()) for ln in lines)


def build_code_corpus(root: Path, roots: list[tuple[str, Path]]) -> CodeCorpus:
    """Scan, deduplicate, split and write the code domain into `root/code-<digest>/` (a fresh folder, renamed into
    place whole, so a reader never sees half a corpus)."""
    skipped: Counter = Counter()
    kept = scan(code_files(roots), skipped)
    if not kept:
        raise CorpusError(f"code corpus: no UTF-8 .py files under {', '.join(str(t) for _, t in roots)}")
    sizes: Counter = Counter()
    for f in kept.values():
        sizes[f.group] += f.path.stat().st_size
    test_groups = {g for g, n in sizes.items() if is_test_group(g, n)}
    work = root / f".code.{os.getpid()}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        counts = _write_splits(work, kept, test_groups)
    except BaseException:  # nothing half-written is left behind, whatever stopped the build
        shutil.rmtree(work, ignore_errors=True)
        raise
    digest = hashlib.sha256((work / "code-manifest.jsonl").read_bytes() + Path(__file__).read_bytes()).hexdigest()
    final = root / f"code-{digest[:12]}"
    if final.is_dir():  # the same sources written before (the stamp was lost): keep the files already there
        shutil.rmtree(work)
    else:
        os.replace(work, final)
    for stale in root.glob("code-*"):  # a corpus of sources no longer installed: 300 MB nothing names any more
        if stale.is_dir() and stale != final:
            shutil.rmtree(stale, ignore_errors=True)
    return CodeCorpus(
        final / "code-train.jsonl", final / "code-test.jsonl", final / "code-manifest.jsonl", **counts,
        skipped=dict(sorted(skipped.items())),
    )  # fmt: skip


def _write_splits(work: Path, kept: dict[str, CodeFile], test_groups: set[str]) -> dict[str, int]:
    """Write train, test and manifest file by file; the counts of CodeCorpus. Train and test files go in the order
    of their sha256 (a fixed shuffle: a prefix of either samples all of its groups), the manifest by group and path."""
    n: Counter = Counter()
    train_texts: set[str] = set()  # sha256 of each train document: a test chunk equal to one is dropped
    with open(work / "code-train.jsonl", "w", encoding="utf-8") as train:
        for digest in sorted(d for d, f in kept.items() if f.group not in test_groups):
            text = kept[digest].path.read_text(encoding="utf-8")
            train.write(json.dumps({"text": text}) + "\n")
            train_texts.add(hashlib.sha256(text.strip().encode()).hexdigest())
            n.update(n_files_train=1, n_bytes_train=len(text.encode()), n_words_train=len(text.split()))
    with open(work / "code-test.jsonl", "w", encoding="utf-8") as test:
        for digest in sorted(d for d, f in kept.items() if f.group in test_groups):
            n["n_files_test"] += 1
            for doc in code_chunks(kept[digest].path.read_text(encoding="utf-8")):
                if hashlib.sha256(doc.encode()).hexdigest() not in train_texts:
                    test.write(json.dumps({"text": doc}) + "\n")
                    n.update(n_docs_test=1, n_bytes_test=len(doc.encode()), n_words_test=len(doc.split()))
    with open(work / "code-manifest.jsonl", "w", encoding="utf-8") as manifest:
        for digest, f in sorted(kept.items(), key=lambda kv: (kv[1].group, kv[1].rel)):
            split = "test" if f.group in test_groups else "train"
            row = {"split": split, "group": f.group, "version": f.version, "path": f.rel, "sha256": digest}
            manifest.write(json.dumps(row) + "\n")
    keys = ("n_files_train", "n_files_test", "n_docs_test", "n_bytes_train", "n_words_train")
    return {k: n[k] for k in (*keys, "n_bytes_test", "n_words_test")}
