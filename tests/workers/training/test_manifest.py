"""`<artifact>.manifest.json`: what an artifact was built from, beside it (workers.training.manifest)."""

from __future__ import annotations

import hashlib
import json

from workers.corpora import TextSource
from workers.training.manifest import manifest_path, provenance_file, write_manifest


def _code_like(tmp_path):
    """A corpus folder as the built-in code corpus writes it: NAME-train.jsonl beside NAME-manifest.jsonl."""
    train = tmp_path / "code-train.jsonl"
    train.write_text('{"text": "def f():\\n    return 1\\n"}\n')
    rows = [
        {"split": "test", "group": "stdlib:json", "version": "", "path": "json/a.py", "sha256": "1" * 64},
        {"split": "train", "group": "dist:six", "version": "1.17.0", "path": "six.py", "sha256": "2" * 64},
    ]
    (tmp_path / "code-manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return TextSource(name="code-1e6", path=str(train)), rows


def test_a_code_corpus_manifest_lists_its_split_files_and_hashes(tmp_path):
    source, rows = _code_like(tmp_path)
    base = tmp_path / "code-1e6-abc.igtree"
    base.write_bytes(b"tree")
    where, digest = write_manifest(
        base, kind="instance base", sha256="f" * 64, source=source, tokenizer="tok", max_tokens=10**6, tokens=321
    )
    assert where == str(manifest_path(base)) == f"{base}.manifest.json"
    m = json.loads(open(where, encoding="utf-8").read())
    assert digest == hashlib.sha256(open(where, "rb").read()).hexdigest()
    assert m["artifact"] == base.name and m["sha256"] == "f" * 64 and m["tokenizer"] == "tok"
    assert m["corpus"] == {**source.identity(), "max_tokens": 10**6, "tokens": 321, "documents": None}
    (f,) = m["source_files"]
    assert f["sha256"] == hashlib.sha256(open(source.path, "rb").read()).hexdigest()
    prov = m["provenance"]
    assert prov["split"] == "train" and prov["files"] == [rows[1]] and prov["groups"] == 1  # the test file is not in it
    again = write_manifest(
        base, kind="instance base", sha256="f" * 64, source=source, tokenizer="tok", max_tokens=10**6, tokens=321
    )
    assert again == (where, digest)  # the same inputs, the same bytes


def test_a_plain_text_corpus_has_no_provenance(tmp_path):
    text = tmp_path / "legal-train.txt"
    text.write_text("Article 1.\n\nArticle 2.\n")
    source = TextSource(name="legal", path=str(text))
    assert provenance_file(source) is None  # no legal-manifest.jsonl beside it
    assert provenance_file(TextSource(name="wiki", dataset="Salesforce/wikitext")) is None
    where, _ = write_manifest(
        tmp_path / "d.rest", kind="datastore", sha256="0" * 64, source=source, tokenizer="t", max_tokens=None, tokens=9
    )
    m = json.loads(open(where, encoding="utf-8").read())
    assert m["provenance"] is None and m["source_files"][0]["bytes"] == text.stat().st_size
