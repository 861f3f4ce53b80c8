"""Prompts from local text sources: first N words, short documents skipped and counted, deterministic."""

from __future__ import annotations

import json

import pytest

from workers.corpora import TextSource
from workers.corpora.tasks import PAPER_TASKS, PROMPT_MARGIN_WORDS, first_words, load_prompts
from workers.errors import CorpusError


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


# ---------------------------------------------------------------- WikiText: rows grouped into articles


def _wikitext_rows(n_articles: int = 3, paragraphs: int = 2, words: int = 40) -> list[str]:
    """Rows shaped like HF wikitext-103-raw: blank rows, ` = Title = `, ` = = Section = = `, one paragraph per row."""
    rows = [""]
    for a in range(n_articles):
        rows += [f" = Article {a} = \n", ""]
        for p in range(paragraphs):
            if p == 1:
                rows += [f" = = Section {a} = = \n", ""]
            rows += [" " + " ".join(f"a{a}p{p}w{i}" for i in range(words)) + " \n", ""]
    return rows


def _parquet(path, rows):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": rows}), path)
    return str(path)


def test_wikitext_rows_group_into_articles(tmp_path):
    from workers.corpora import wikitext_articles

    rows = [r.strip() for r in _wikitext_rows() if r.strip()]
    articles = list(wikitext_articles(rows))
    assert len(articles) == 3  # one per ` = Title = `, not one per paragraph or section
    assert articles[0].split("\n")[0].startswith("a0p0w0") and "a0p1w0" in articles[0]
    assert "=" not in "".join(articles)  # title and section rows are markup, left out


def test_wikitext_prompt_is_first_50_words_of_an_article(tmp_path):
    # two 40-word paragraphs per article: a paragraph alone is too short for 50 words + margin, an article is not
    source = TextSource(name="wikitext", path=_parquet(tmp_path / "wikitext-test.parquet", _wikitext_rows()))
    ps = load_prompts(source, count=3, prompt_words=50)
    assert [p.doc_id for p in ps.prompts] == [0, 1, 2] and ps.skipped_short == 0
    words = ps.prompts[1].text.split()
    assert len(words) == 50 and words[0] == "a1p0w0" and words[40] == "a1p1w0"  # crosses into paragraph 2


def test_article_grouping_is_by_name_or_option(tmp_path):
    path = _parquet(tmp_path / "rows.parquet", _wikitext_rows())
    plain = TextSource(name="t", path=path)
    with pytest.raises(CorpusError, match="0 documents"):  # rows as documents: each paragraph is too short
        load_prompts(plain, count=1, prompt_words=50)
    assert len(load_prompts(plain, count=3, prompt_words=50, articles=True)) == 3
    named = TextSource(name="t", path=str(tmp_path / "wikitext-test.parquet"))
    _parquet(named.path, _wikitext_rows())
    with pytest.raises(CorpusError, match="0 documents"):
        load_prompts(named, count=1, prompt_words=50, articles=False)


def test_wikitext_raw_text_file(tmp_path):
    # wiki.test.raw: every row is followed by a blank line, so each .txt block is one row
    path = tmp_path / "wiki.test.raw.wikitext.txt"
    path.write_text("".join(r if r.endswith("\n") else r + "\n" for r in _wikitext_rows()))
    ps = load_prompts(TextSource(name="w", path=str(path)), count=3, prompt_words=50)
    assert [p.text.split()[0] for p in ps.prompts] == ["a0p0w0", "a1p0w0", "a2p0w0"]


def test_paper_wikitext_task_is_detected_as_wikitext():
    from workers.corpora import is_wikitext

    assert is_wikitext(PAPER_TASKS["wikitext"]) and not is_wikitext(PAPER_TASKS["eurlex"])
