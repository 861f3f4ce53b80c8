"""The offline demo corpora: real package text, disjoint train/test, paragraph-sized documents, idempotent."""

from __future__ import annotations

import re

import pytest

from orchestrator.run.demo_corpora import (
    DOMAINS,
    MIN_DOC_WORDS,
    chunk_text,
    license_texts,
    play_markdown_to_text,
    pydoc_texts,
    split_keys,
    write_demo_corpora,
)
from workers.corpora import TextSource, iter_documents
from workers.corpora.tasks import load_prompts
from workers.errors import CorpusError


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-data")
    return root, write_demo_corpora(root)


def _docs(path) -> list[str]:
    return list(iter_documents(TextSource(name=path.stem, path=str(path))))


def test_both_domains_are_written_with_counts_matching_the_files(written):
    root, corpora = written
    assert tuple(corpora) == DOMAINS
    for domain, c in corpora.items():
        assert c.train_path == root / f"{domain}-train.txt" and c.test_path == root / f"{domain}-test.txt"
        train, test = _docs(c.train_path), _docs(c.test_path)
        assert (len(train), len(test)) == (c.n_docs_train, c.n_docs_test)
        assert c.n_words == sum(len(d.split()) for d in train + test)


def test_sizes_and_split_ratio(written):
    _, corpora = written
    shakespeare, pydoc = corpora["shakespeare"], corpora["pydoc"]
    assert shakespeare.n_words > 800_000 and pydoc.n_words > 50_000  # the whole of both packages' text
    for c in (shakespeare, pydoc):
        assert c.n_docs_test >= 35
        assert 0.05 < c.n_docs_test / (c.n_docs_train + c.n_docs_test) < 0.15
    legal = corpora["legal"]  # 14 license texts split whole, a fifth of the words held out: 20+ prompts
    assert legal.n_words > 30_000 and legal.n_docs_test >= 20 and legal.n_docs_train > 150


def test_license_aliases_are_read_once(tmp_path):
    (tmp_path / "GPL-3").write_text("the GNU General Public License")
    (tmp_path / "GPL").symlink_to(tmp_path / "GPL-3")
    (tmp_path / "MIT").write_text("Permission is hereby granted")
    assert license_texts(tmp_path) == {"GPL-3": "the GNU General Public License", "MIT": "Permission is hereby granted"}
    with pytest.raises(CorpusError, match="legal demo domain: .*nowhere not found"):
        license_texts(tmp_path / "nowhere")


def test_documents_are_paragraph_sized(written):
    _, corpora = written
    for c in corpora.values():
        words = [len(d.split()) for d in _docs(c.train_path) + _docs(c.test_path)]
        assert min(words) >= MIN_DOC_WORDS
        assert max(words) <= 2 * 300
        assert 100 <= sum(words) / len(words) <= 300


def test_train_and_test_share_no_documents(written):
    _, corpora = written
    for c in corpora.values():
        assert not set(_docs(c.train_path)) & set(_docs(c.test_path))


def test_split_is_by_whole_topic():
    texts = pydoc_texts()
    train, test = split_keys(texts)
    assert not set(train) & set(test) and sorted(train + test) == sorted(texts)
    share = sum(len(texts[k].split()) for k in test) / sum(len(t.split()) for t in texts.values())
    assert 0.07 < share <= 0.1


def test_shakespeare_text_is_plain(written):
    _, corpora = written
    text = corpora["shakespeare"].test_path.read_text()
    assert "**" not in text and "#" not in text and "\\" not in text
    assert "[Enter " in text  # stage directions kept, bracketed


def test_rewriting_is_idempotent(written):
    root, corpora = written
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for c in corpora.values() for p in (c.train_path, c.test_path)}
    again = write_demo_corpora(root)
    assert again == corpora
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before
    names = sorted(x.name for x in root.iterdir())
    assert not [n for n in names if n.endswith(".tmp")]  # no temp files left
    assert [n for n in names if not n.startswith(".")] == sorted(p.name for p in before)
    assert [n for n in names if n.startswith(".")] == sorted(f".{d}.stamp" for d in corpora)


def test_a_stamped_domain_is_not_read_again_until_a_file_or_its_stamp_goes(written, monkeypatch):
    """The sources are split and chunked once (seconds: every `validate` and `run` of a demo spec calls this); a
    missing file or a torn stamp makes the domain again, with the same bytes."""
    import orchestrator.run.demo_corpora as dc

    root, corpora = written
    real = dc.shakespeare_texts
    for name in ("shakespeare_texts", "pydoc_texts", "license_texts"):
        monkeypatch.setattr(dc, name, lambda *a: (_ for _ in ()).throw(AssertionError("read again")))
    assert write_demo_corpora(root) == corpora
    test_file = corpora["shakespeare"].test_path
    data = test_file.read_bytes()
    test_file.unlink()
    with pytest.raises(AssertionError, match="read again"):
        write_demo_corpora(root)
    monkeypatch.setattr(dc, "shakespeare_texts", real)
    (root / ".shakespeare.stamp").write_text("{torn")
    assert write_demo_corpora(root) == corpora  # shakespeare made again, from its sources; the others still stamped
    assert test_file.read_bytes() == data


def test_every_test_document_gives_a_50_word_prompt(written):
    _, corpora = written
    for c in corpora.values():
        ps = load_prompts(TextSource(name=c.domain, path=str(c.test_path)), count=c.n_docs_test)
        assert ps.skipped_short == 0 and len(ps) == c.n_docs_test


def test_play_markdown_conversion():
    md = (
        "# Play\n\n## ACT I\n\n### SCENE I. A heath.\n\n_Enter A and\nB_\n\n**A**  \nHail, \\--sir!  \n__\\[Aside]_  \n"
    )
    paragraphs = [p.strip("\n") for p in re.split(r"\n\s*\n", play_markdown_to_text(md)) if p.strip()]
    assert paragraphs == ["SCENE I. A heath.", "[Enter A and\nB]", "A\nHail, --sir!\n[Aside]"]


def test_chunk_text_merges_short_paragraphs_and_keeps_a_short_tail():
    paras = [" ".join(["w"] * 60)] * 5 + [" ".join(["t"] * 10)]
    chunks = chunk_text("\n\n".join(paras))
    assert [len(c.split()) for c in chunks] == [180, 130]  # 3 paragraphs pass 150 words; 2 + tail remain
    assert all("\n\n" not in c for c in chunks)
