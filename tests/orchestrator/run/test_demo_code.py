"""The built-in code domain over a fake site-packages and stdlib: split by whole distribution, duplicates dropped
before the split, bad files skipped and counted, deterministic, stamped, streamed file by file."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import re
import shutil
import tracemalloc
from pathlib import Path

import pytest

from orchestrator.run import demo_code
from orchestrator.run.demo_code import (
    MAX_TEST_GROUP_BYTES,
    MIN_DOC_WORDS,
    code_chunks,
    code_roots,
    is_test_group,
    write_code_corpus,
)
from workers.corpora import TextSource, iter_documents
from workers.corpora.tasks import load_prompts

N_DISTS = 12


def _module(name: str, n_funcs: int = 6) -> str:
    """A module with a head (docstring, imports) and `n_funcs` functions of ~45 words each."""
    head = f'"""The {name} module."""\n\nimport os\nimport sys\n\n'
    body = "".join(
        f"def {name}_f{i}(x, y):\n    # add {name} {i}\n"
        + "".join(f"    v{j} = x + y * {i} - {j}  # {name}\n" for j in range(6))
        + "    return v0\n\n\n"
        for i in range(n_funcs)
    )
    return head + body + f"@property\ndef {name}_decorated(self):\n    return os.sep + sys.prefix + {name!r}\n"


def _dist(site: Path, name: str, files: dict[str, str]) -> None:
    """A distribution installed in `site`: its files and a dist-info folder whose RECORD lists them."""
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    rows = [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"]
    (info / "RECORD").write_text("".join(f"{r},,\n" for r in rows))


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """site-packages with N_DISTS distributions (one vendoring another's file), a folder no distribution owns, a
    latin-1 file, an oversized file and an empty one; a stdlib of two modules."""
    monkeypatch.setattr(demo_code, "MAX_FILE_BYTES", 20_000)
    monkeypatch.setattr(demo_code, "TEST_FRACTION", 0.5)  # a dozen groups: both sides get several
    site, stdlib = tmp_path / "site", tmp_path / "stdlib"
    for i in range(N_DISTS):
        name = f"pkg{i}"
        _dist(site, name, {f"{name}/__init__.py": "", f"{name}/core.py": _module(name)})
    _dist(site, "vendorer", {"vendorer/main.py": _module("vendorer"), "vendorer/_vendor/pkg0/core.py": _module("pkg0")})
    (site / "loose").mkdir()
    (site / "loose" / "mod.py").write_text(_module("loose"))
    (site / "loose" / "latin.py").write_bytes("# caf\u00e9\nx = 1\n".encode("latin-1"))
    (site / "loose" / "table.py").write_text("T = [\n" + "    1,\n" * 5000 + "]\n")
    (site / "__pycache__").mkdir()
    (site / "__pycache__" / "cached.py").write_text(_module("cached"))
    (stdlib / "json").mkdir(parents=True)
    (stdlib / "json" / "__init__.py").write_text(_module("json"))
    (stdlib / "os.py").write_text(_module("os"))
    return [("site-packages", site), ("stdlib", stdlib)]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_split_is_by_whole_group_and_no_test_file_or_copy_trains(roots, tmp_path):
    code = write_code_corpus(tmp_path / "out", roots)
    manifest = _rows(code.manifest_path)
    sides: dict[str, set[str]] = {}
    for row in manifest:
        sides.setdefault(row["group"], set()).add(row["split"])
    assert all(len(s) == 1 for s in sides.values())
    assert {"train"} in sides.values() and {"test"} in sides.values()
    assert {"dist:pkg3", "site-packages:loose", "stdlib:json", "stdlib:os", "dist:vendorer"} <= set(sides)
    assert all(r["version"] == "1.0" for r in manifest if r["group"].startswith("dist:"))
    train = [d["text"] for d in _rows(code.train_path)]
    test = [d["text"] for d in _rows(code.test_path)]
    site = roots[0][1]
    for row in manifest:
        if row["split"] == "test":
            text = (site.parent / row["path"].replace("site-packages/", "site/", 1)).read_text()
            assert text not in train and not any(text.strip() in t for t in train)
    assert test and not any(doc in t for doc in test for t in train)
    assert (len(train), len(test)) == (code.n_files_train, code.n_docs_test)
    assert code.n_words_train == sum(len(t.split()) for t in train)


def test_duplicates_are_dropped_once_before_the_split_and_bad_files_counted(roots, tmp_path):
    code = write_code_corpus(tmp_path / "out", roots)
    paths = [r["path"] for r in _rows(code.manifest_path)]
    assert "site-packages/pkg0/core.py" in paths  # the copy with the shortest path is the one kept
    assert "site-packages/vendorer/_vendor/pkg0/core.py" not in paths
    assert not any("__pycache__" in p or "latin" in p or "table" in p for p in paths)
    assert code.skipped == {"duplicate": 1, "empty": N_DISTS, "not_utf8": 1, "too_large": 1}


def test_building_twice_gives_the_same_bytes_and_folder(roots, tmp_path):
    a, b = write_code_corpus(tmp_path / "a", roots), write_code_corpus(tmp_path / "b", roots)
    assert a.train_path.parent.name == b.train_path.parent.name
    for x, y in ((a.train_path, b.train_path), (a.test_path, b.test_path), (a.manifest_path, b.manifest_path)):
        assert x.read_bytes() == y.read_bytes()


def test_stamped_corpus_is_reused_until_a_source_changes(roots, tmp_path, monkeypatch):
    first = write_code_corpus(tmp_path / "out", roots)
    built = []
    real = demo_code.build_code_corpus
    monkeypatch.setattr(demo_code, "build_code_corpus", lambda *a: built.append(1) or real(*a))
    assert write_code_corpus(tmp_path / "out", roots) == first and not built
    (roots[0][1] / "pkg1" / "core.py").write_text(_module("pkg1", n_funcs=8))
    second = write_code_corpus(tmp_path / "out", roots)
    assert built and second.train_path.parent != first.train_path.parent  # other sources, another cell key path
    assert not first.train_path.parent.exists()  # the stale corpus is removed


def test_train_and_test_files_are_shuffled_by_content_hash(roots, tmp_path):
    """A max_tokens prefix samples every group rather than the alphabetically first distributions."""
    code = write_code_corpus(tmp_path / "out", roots)
    by_text = {r["sha256"]: r["path"] for r in _rows(code.manifest_path) if r["split"] == "train"}
    assert list(by_text) != sorted(by_text, key=by_text.get)
    assert len(_rows(code.train_path)) == len(by_text)
    # the test files too: a task's first prompts come from many held-out groups, not the first one in name order
    names = [re.match(r"(?:@property\n)?def (\w+?)_", d["text"]).group(1) for d in _rows(code.test_path)]
    assert len(set(names[:4])) > 1 and names != sorted(names)


def test_files_are_streamed_one_at_a_time(tmp_path, monkeypatch):
    """Peak Python memory stays well under the corpus's size: the writer holds one file, never the corpus."""
    site = tmp_path / "site"
    for i in range(40):
        big = "\n\n".join(_module(f"m{i}_{k}", n_funcs=10) for k in range(25))  # ~100 kB a file
        _dist(site, f"d{i}", {f"d{i}/big.py": big})
    total = sum(p.stat().st_size for p in site.rglob("*.py"))
    tracemalloc.start()
    write_code_corpus(tmp_path / "out", [("site-packages", site)])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total > 2_000_000 and peak < total / 4


def test_test_documents_start_at_top_level_code_and_give_50_word_prompts(roots, tmp_path):
    code = write_code_corpus(tmp_path / "out", roots)
    docs = list(iter_documents(TextSource(name="code", path=str(code.test_path))))
    assert docs and all(d.startswith(("def ", "class ", "@", "async ")) for d in docs)
    assert all(len(d.split()) >= MIN_DOC_WORDS for d in docs)
    prompts = load_prompts(TextSource(name="code", path=str(code.test_path)), count=len(docs))
    assert len(prompts) == len(docs)


def test_code_chunks_leave_the_head_out_and_keep_decorators_with_their_def():
    chunks = code_chunks(_module("m", n_funcs=6))
    assert chunks and not any("import os" in c for c in chunks)
    assert all(c.startswith(("def ", "@")) for c in chunks)
    assert "@property\ndef m_decorated" in chunks[-1]
    assert "".join(chunks).count("def m_f") == 6  # every function lands in one document


def test_a_spec_without_code_never_builds_it(monkeypatch, tmp_path):
    from orchestrator.run import inputs

    monkeypatch.setenv("GREENSPEC_CACHE", str(tmp_path))
    monkeypatch.setattr(inputs, "write_demo_corpora", lambda root: {})
    monkeypatch.setattr(inputs, "write_code_corpus", lambda root: pytest.fail("built the code corpus"))
    assert inputs._data_paths({"pydoc-train", "pydoc-test"}) == {}


# The real venv by stat alone (`code_files` resolves every path: minutes over the whole venv): the distributions'
# RECORDs and the stdlib's top-level modules, each a group as the builder names it, with its .py bytes.
def _real_groups() -> dict[str, tuple[int, list[Path]]]:
    """group -> (bytes of its .py files, its files) over the running venv's distributions and stdlib."""
    (_, site), (_, stdlib) = code_roots()
    out: dict[str, tuple[int, list[Path]]] = {}
    for dist in importlib.metadata.distributions(path=[str(site)]):
        files = [site / f for f in dist.files or [] if ".." not in f.parts]
        n = sum(f.stat().st_size for f in files if f.suffix == ".py" and f.is_file())
        out[f"dist:{re.sub(r'[-_.]+', '-', dist.metadata['Name'] or '').lower()}"] = (n, files)
    for entry in stdlib.iterdir():
        if entry.name.endswith(".py") or (entry.is_dir() and entry.name not in demo_code.SKIP_DIRS):
            files = [entry] if entry.is_file() else [p for p in entry.rglob("*.py") if "__pycache__" not in p.parts]
            out[f"stdlib:{entry.name.removesuffix('.py')}"] = (sum(f.stat().st_size for f in files), files)
    return out


def _copy_groups(real: dict[str, tuple[int, list[Path]]], groups: set[str], into: Path) -> list[tuple[str, Path]]:
    """Roots under `into` holding the real files of `groups`, each distribution whole (every file of its RECORD, its
    dist-info included), laid out as installed."""
    roots = [(label, into / label) for label, _ in code_roots()]
    for (_, top), (_, dest) in zip(code_roots(), roots, strict=True):
        for group in groups:
            for src in real[group][1]:
                if src.is_relative_to(top) and not src.is_relative_to(top / "site-packages") and src.is_file():
                    (dest / src.relative_to(top)).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dest / src.relative_to(top))
    return roots


# multiprocess ships copies of the stdlib's multiprocessing files, byte for byte: real duplicates across groups.
REAL_TRAIN = {"dist:multiprocess", "stdlib:multiprocessing", "stdlib:textwrap", "stdlib:argparse", "stdlib:shlex"}


@pytest.mark.slow
def test_the_real_corpus_from_this_venv(tmp_path, monkeypatch):
    """The real code domain on real files. The full build reads 300+ MB (minutes), so: the split rule over the whole
    venv by file sizes alone (train volume, torch trains, 100+ held-out files), then a real build over every held-out
    group whole and a few train groups that copy each other's files, checked for dedup, the split by whole
    group, no test file or copy of one in train, the JSONL rows and the stamp. Tokens are estimated from a sample."""
    from tokenizers import Tokenizer

    from workers.models.pretrained import resolve_model

    real = _real_groups()
    planned = {
        side: {g: n for g, (n, _) in real.items() if is_test_group(g, n) == (side == "test")}
        for side in ("train", "test")
    }
    assert sum(planned["train"].values()) > 100_000_000 and planned["train"]["dist:torch"] > MAX_TEST_GROUP_BYTES
    assert len(planned["test"]) > 10 and not REAL_TRAIN & set(planned["test"])
    roots = _copy_groups(real, set(planned["test"]) | REAL_TRAIN, tmp_path / "src")
    code = write_code_corpus(tmp_path / "out", roots)
    assert code.n_files_test > 100 and code.n_docs_test > 500  # 100+ prompts: every held-out group is here
    assert code.n_bytes_test < 0.2 * sum(planned["train"].values())

    manifest = _rows(code.manifest_path)
    sides = {r["group"]: r["split"] for r in manifest}
    assert len(sides) == len({(r["group"], r["split"]) for r in manifest})  # a group is on one side only
    assert {g for g, s in sides.items() if s == "test"} == set(planned["test"]) and REAL_TRAIN <= set(sides)
    assert len({r["sha256"] for r in manifest}) == len(manifest) and code.skipped["duplicate"] > 0
    paths = {r["path"] for r in manifest}
    assert "site-packages/multiprocess/heap.py" in paths and "stdlib/multiprocessing/heap.py" not in paths

    train, test = _rows(code.train_path), _rows(code.test_path)
    assert all(set(r) == {"text"} and isinstance(r["text"], str) for r in train + test)
    train_shas = [hashlib.sha256(r["text"].encode()).hexdigest() for r in train]
    assert train_shas == sorted(r["sha256"] for r in manifest if r["split"] == "train")  # whole files, by sha256
    test_shas = {r["sha256"] for r in manifest if r["split"] == "test"}
    assert not test_shas & set(train_shas)  # no held-out file, nor a copy of one, trains
    stripped = {hashlib.sha256(r["text"].strip().encode()).hexdigest() for r in train}
    assert not any(hashlib.sha256(r["text"].encode()).hexdigest() in stripped for r in test)

    monkeypatch.setattr(demo_code, "build_code_corpus", lambda *a: pytest.fail("rebuilt a stamped corpus"))
    assert write_code_corpus(tmp_path / "out", roots) == code  # the stamp: a second call reads, never builds

    # SmolLM2's own tokenizer.json, read by `tokenizers` (transformers' AutoTokenizer takes half a minute to load)
    tok = Tokenizer.from_file(str(Path(resolve_model("smollm2-135m")) / "tokenizer.json"))
    sample = [r["text"] for r in train[:300]]
    ratio = sum(len(tok.encode(t).ids) for t in sample) / sum(len(t.encode()) for t in sample)
    n_train = sum(planned["train"].values())
    print(
        f"code train (planned): {len(planned['train'])} groups, {n_train} bytes, ~{ratio * n_train / 1e6:.1f}M "
        f"smollm2 tokens ({ratio:.3f} tokens/byte); test: {code.n_files_test} files, {code.n_docs_test} documents, "
        f"{code.n_words_test} words; skipped in the subset {code.skipped}"
    )
    assert ratio * n_train > 10_000_000


def test_study_code_spec_gives_one_train_cell_per_max_tokens():
    """examples/study-code.toml parses without building anything, and each max_tokens cap is its own cell."""
    from orchestrator.run.cells import corpus_cell
    from orchestrator.run.spec_paths import check_paths, load_spec

    spec = load_spec(Path(__file__).parents[3] / "examples" / "study-code.toml")
    check_paths(spec)
    caps = {c.name: c.max_tokens for c in spec.corpora}
    assert caps == {"code-1e5": 100_000, "code-1e6": 1_000_000, "code-1e7": 10_000_000, "code-all": None}
    assert {c.path for c in spec.corpora} == {"demo:code-train"} and spec.tasks[0].prompts >= 100
    assert len({corpus_cell(spec, c).key for c in spec.corpora}) == 4
    assert spec.sweep.replay and spec.verifier.model == "smollm2-135m"


def test_study_shakespeare_spec_gives_one_train_cell_per_size_up_to_the_whole_text():
    """examples/study-shakespeare.toml (the learning curve on Shakespeare) parses, and each size is its own cell."""
    from orchestrator.run.cells import corpus_cell
    from orchestrator.run.spec_paths import check_paths, load_spec

    spec = load_spec(Path(__file__).parents[3] / "examples" / "study-shakespeare.toml")
    check_paths(spec)
    caps = {c.name: c.max_tokens for c in spec.corpora}
    assert caps == {
        "shakespeare-1e4": 10_000,
        "shakespeare-1e5": 100_000,
        "shakespeare-1e6": 1_000_000,
        "shakespeare-all": None,
    }
    assert len({corpus_cell(spec, c).key for c in spec.corpora}) == 4 and spec.tasks[0].prompts >= 50


def test_study_gemma_and_distill_specs_parse_with_their_cells():
    """examples/study-gemma.toml (Gemma on code and Shakespeare, 50 prompts each, its curve on code) and
    examples/study-distill.toml (10^6 labelled code tokens beside the 10^6 and 10^7 corpus bases) parse."""
    from analysis.curve import corpus_sizes
    from orchestrator.run.cells import corpus_cell
    from orchestrator.run.spec_paths import check_paths, load_spec

    root = Path(__file__).parents[3] / "examples"
    gemma = load_spec(root / "study-gemma.toml")
    check_paths(gemma)
    assert gemma.verifier.model == "gemma3-270m" and {t.name: t.prompts for t in gemma.tasks} == {
        "code": 50,
        "shakespeare": 50,
    }
    sizes = corpus_sizes((root / "study-gemma.toml").read_text(), {})
    assert sorted(t for f, t in sizes.values() if f == "olifant") == [1e5, 1e6, 1e7]  # Shakespeare's base: no point
    assert len({corpus_cell(gemma, c).key for c in gemma.corpora}) == 4
    distill = load_spec(root / "study-distill.toml")
    check_paths(distill)
    (labelled,) = [c for c in distill.corpora if c.distilled]
    assert labelled.label_max_tokens == 1_000_000 and distill.tasks[0].prompts >= 100
    sizes = corpus_sizes((root / "study-distill.toml").read_text(), {})
    assert sizes["distilled-code-1e6"] == ("olifant (distilled)", 1e6)


def test_a_file_without_def_or_class_gives_no_test_document():
    assert code_chunks("X = 1\n" * 200) == []
    assert code_chunks("") == []


def test_max_tokens_takes_a_reproducible_prefix_of_the_code_train_set(roots, tmp_path):
    from workers.igtree.instances import tokenize_source
    from workers.models.tokenizer import load_tokenizer

    code = write_code_corpus(tmp_path / "out", roots)
    source, tok = TextSource(name="code", path=str(code.train_path)), load_tokenizer("mistral")
    small = tokenize_source(source, tok, tmp_path / "small", max_tokens=300)
    again = tokenize_source(source, tok, tmp_path / "again", max_tokens=300)
    large = tokenize_source(source, tok, tmp_path / "large", max_tokens=1200)
    assert (small.n_tokens, large.n_tokens) == (300, 1200)
    assert small.tokens().tolist() == again.tokens().tolist() == large.tokens()[:300].tolist()
