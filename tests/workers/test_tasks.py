"""Prompts from local text sources: first N words, short documents skipped and counted, deterministic."""

from __future__ import annotations

import json

import pytest

from workers.corpora import TextSource
from workers.errors import CorpusError
from workers.tasks import PAPER_TASKS, PROMPT_MARGIN_WORDS, first_words, load_prompts


def _doc(tag: str, n_words: int) -> str:
    """A document of `n_words` words spread over lines of 7 words, each word tagged with its document."""
    words = [f"{tag}w{i}" for i in range(n_words)]
    return "\n".join(" ".join(words[i : i + 7]) for i in range(0, n_words, 7))


@pytest.fixture
def corpus(tmp_path):
    """A .txt source of 6 documents; documents 1 and 4 are too short for 10-word prompts (+ margin)."""
    sizes = [40, 25, 31, 30, 5, 60]  # 10 + 20 margin = 30 words needed
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join(_doc(f"d{i}", n) for i, n in enumerate(sizes)) + "\n")
    return TextSource(name="toy", path=str(path))


def test_prompt_is_first_n_words_with_original_spacing(corpus):
    ps = load_prompts(corpus, count=2, prompt_words=10)
    first = ps.prompts[0]
    assert first.text.split() == [f"d0w{i}" for i in range(10)]
    assert "\n" in first.text  # line breaks of the document are kept (7 words per line)
    assert (first.task, first.index, first.doc_id, first.n_words) == ("toy", 0, 0, 10)


def test_short_documents_are_skipped_and_counted(corpus):
    ps = load_prompts(corpus, count=4, prompt_words=10)
    assert [p.doc_id for p in ps.prompts] == [0, 2, 3, 5]
    assert [p.index for p in ps.prompts] == [0, 1, 2, 3]
    assert ps.skipped_short == 2
    assert len(ps) == 4 and ps.task == "toy" and ps.prompt_words == 10


def test_exactly_prompt_plus_margin_words_is_usable(corpus):
    ps = load_prompts(corpus, count=3, prompt_words=10)
    assert 10 + PROMPT_MARGIN_WORDS == 30
    assert ps.prompts[2].doc_id == 3  # the 30-word document counts, the 25-word one does not


def test_selection_is_deterministic_and_a_prefix(corpus):
    a = load_prompts(corpus, count=3, prompt_words=10)
    b = load_prompts(corpus, count=3, prompt_words=10)
    fewer = load_prompts(corpus, count=2, prompt_words=10)
    assert a == b
    assert fewer.prompts == a.prompts[:2]
    assert fewer.skipped_short == 1  # stops reading at the last prompt it needs


def test_too_few_usable_documents_is_a_corpus_error(corpus):
    with pytest.raises(CorpusError, match=r"toy: .* has 4 documents of >= 30 words, 5 prompts asked \(2 shorter"):
        load_prompts(corpus, count=5, prompt_words=10)


def test_missing_path_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="no such file"):
        load_prompts(TextSource(name="gone", path=str(tmp_path / "nope.txt")), count=1)


def test_jsonl_column_source(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"article": _doc("a", 80)}, {"article": "too short"}, {"article": _doc("b", 75)}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ps = load_prompts(TextSource(name="pubmed", path=str(path), column="article"), count=2)
    assert [p.doc_id for p in ps.prompts] == [0, 2] and ps.skipped_short == 1
    assert all(len(p.text.split()) == 50 for p in ps.prompts)


def test_bad_counts_are_rejected(corpus):
    with pytest.raises(CorpusError, match="must be >= 1"):
        load_prompts(corpus, count=0)


def test_first_words_short_text_is_none():
    assert first_words("  one two\nthree ", 3) == "one two\nthree"
    assert first_words("one two", 3) is None


def test_paper_tasks_name_the_papers_datasets():
    assert {k: (s.dataset, s.config, s.split, s.column) for k, s in PAPER_TASKS.items()} == {
        "wikitext": ("Salesforce/wikitext", "wikitext-103-raw-v1", "test", "text"),
        "pubmed": ("ccdv/pubmed-summarization", "section", "test", "article"),
        "eurlex": ("coastalcph/lex_glue", "eurlex", "test", "text"),
    }
    assert all(s.name == k and s.path is None for k, s in PAPER_TASKS.items())
