"""Evaluation tasks: prompts cut from the documents of a text source.

A prompt is the first `prompt_words` whitespace-separated words of a document, with the document's own
spacing and line breaks kept. A document shorter than `prompt_words + PROMPT_MARGIN_WORDS` words is
skipped (and counted): it would leave no room for a continuation worth comparing. Selection is
deterministic: the first `count` usable documents in source order.

WikiText's rows are single lines (paragraphs, headings), so for it a document is an *article*, grouped at its
` = Title = ` rows (`workers.corpora.wikitext_articles`): a prompt is the first 50 words of an article, as in
the paper, not of a paragraph. That applies to any source whose dataset id or path mentions "wikitext", or
whenever `articles=True` is passed (`articles=False` keeps rows as documents).

Example:
    >>> ps = load_prompts(TextSource(name="shakespeare", path="demo-data/shakespeare-test.txt"), count=3)
    >>> len(ps.prompts), ps.prompts[0].n_words, ps.skipped_short
    (3, 50, 0)
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from workers.corpora import TextSource, is_wikitext, iter_documents, wikitext_articles
from workers.errors import CorpusError

logger = logging.getLogger(__name__)

PROMPT_MARGIN_WORDS = 20  # a usable document has at least this many words beyond the prompt

# The paper's evaluation sets (hub datasets; streamed, used by examples/paper.toml, never by the tests).
PAPER_TASKS: dict[str, TextSource] = {
    "wikitext": TextSource(
        name="wikitext", dataset="Salesforce/wikitext", config="wikitext-103-raw-v1", split="test", column="text"
    ),
    "pubmed": TextSource(
        name="pubmed", dataset="ccdv/pubmed-summarization", config="section", split="test", column="article"
    ),
    "eurlex": TextSource(name="eurlex", dataset="coastalcph/lex_glue", config="eurlex", split="test", column="text"),
}

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Prompt:
    """One prompt: the `index`-th of its task, cut from document number `doc_id` (0-based, source order)."""

    task: str
    index: int
    text: str
    doc_id: int
    n_words: int


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one task, and how many documents were skipped as too short on the way."""

    task: str
    source: str
    prompt_words: int
    prompts: tuple[Prompt, ...]
    skipped_short: int

    def __len__(self) -> int:
        return len(self.prompts)


def first_words(text: str, n_words: int) -> str | None:
    """The text up to the end of its `n_words`-th word (original spacing kept), or None if it is shorter."""
    for i, match in enumerate(_WORD.finditer(text), 1):
        if i == n_words:
            return text[: match.end()].lstrip()
    return None


def task_documents(source: TextSource, articles: bool | None = None):
    """The documents prompts are cut from: WikiText articles when `articles` (None: when `source` is WikiText)."""
    docs = iter_documents(source)
    return wikitext_articles(docs) if (is_wikitext(source) if articles is None else articles) else docs


def load_prompts(source: TextSource, count: int, prompt_words: int = 50, articles: bool | None = None) -> PromptSet:
    """The first `count` usable documents of `source` as prompts of `prompt_words` words.

    `articles` groups rows into WikiText articles (None: only for a WikiText source; see the module doc).
    Raises CorpusError if the source is missing/unreadable or holds fewer than `count` usable documents.
    """
    if count < 1 or prompt_words < 1:
        raise CorpusError(f"{source.name}: prompts and prompt_words must be >= 1 (got {count}, {prompt_words})")
    min_words = prompt_words + PROMPT_MARGIN_WORDS
    prompts: list[Prompt] = []
    skipped = 0
    for doc_id, doc in enumerate(task_documents(source, articles)):
        if len(_WORD.findall(doc)) < min_words:
            skipped += 1
            continue
        text = first_words(doc, prompt_words)
        prompts.append(Prompt(source.name, len(prompts), text, doc_id, prompt_words))
        if len(prompts) == count:
            break
    if len(prompts) < count:
        raise CorpusError(
            f"{source.name}: {source.describe()} has {len(prompts)} documents of >= {min_words} words, "
            f"{count} prompts asked ({skipped} shorter ones skipped); lower prompts or prompt_words"
        )
    logger.info(
        "task %s: %d prompts from %s (%d short documents skipped)", source.name, count, source.describe(), skipped
    )
    return PromptSet(source.name, source.describe(), prompt_words, tuple(prompts), skipped)
