"""Texts: Table 5 (redundancy of the generated texts) and one generation beside its greedy reference."""

from __future__ import annotations

import logging
from pathlib import Path

import streamlit as st

from dashboard import queries, tables, ui
from workers.errors import GreenspecError

logger = logging.getLogger(__name__)


def spec_tokenizer(spec: dict) -> str | None:
    """The first string under a `tokenizer` key anywhere in the spec (schema-agnostic on purpose)."""
    for key, value in spec.items():
        if key == "tokenizer" and isinstance(value, str):
            return value
        if isinstance(value, dict) and (found := spec_tokenizer(value)):
            return found
    return None


@st.cache_resource(show_spinner="Loading the tokenizer…")
def tokenizer(name: str):
    """The spec's tokenizer, only from offline sources (never the network from a page); None if unloadable."""
    from workers.tokenizer import MISTRAL, load_tokenizer

    if name != MISTRAL and not Path(name).is_dir():
        return None
    try:
        return load_tokenizer(name)
    except GreenspecError as err:
        logger.warning("tokenizer %s not loadable: %s", name, err)
        return None


def redundancy(f: ui.Filters) -> None:
    """Table 5 over the selected generations and their references."""
    texts = f.apply(queries.texts(f.url, f.exp_id))
    refs = queries.references(f.url, f.exp_id)
    refs = refs[refs["task"].isin(f.tasks)] if f.tasks else refs
    spec = tables.PAPER_TABLES["table5"]
    table = tables.redundancy_table(tables.redundancy_frame(texts, refs), spec.metrics)
    ui.metric_table_block(table, spec.title, spec.metrics, "table5")
    st.caption("Within-text 4-gram repetition, cross-document 4-gram overlap and gzip ratio, one text per prompt.")


def drill_down(f: ui.Filters) -> None:
    """One generation beside its reference, accepted draft tokens highlighted."""
    st.subheader("One generation")
    texts = f.apply(queries.texts(f.url, f.exp_id))
    if texts.empty:
        st.info("No generation in this selection.")
        return
    labels = {int(r.id): f"#{r.id} {r.strategy} {r.task} k={r.k} {r.regime} prompt {r.prompt_index}"
              for r in texts.itertuples()}
    drafted = texts.index[texts["draft"] != tables.PLAIN]
    first = texts.index.get_loc(drafted[0]) if len(drafted) else 0  # open on a run with something to highlight
    gen_id = st.selectbox("Generation", list(labels), index=first, format_func=labels.get, key="texts_gen")
    gen = queries.generation(f.url, gen_id)
    refs = queries.references(f.url, f.exp_id)
    ref = refs[(refs["task"] == gen["task"]) & (refs["prompt_index"] == gen["prompt_index"])]
    cols = st.columns(4)
    cols[0].metric("ROUGE-L", "–" if gen["rouge_l"] is None else f"{gen['rouge_l']:.3f}")
    cols[1].metric("exact match", {True: "yes", False: "no"}.get(gen["exact_match"], "–"))
    cols[2].metric("acceptance", "–" if gen["acceptance"] is None else f"{gen['acceptance']:.1%}")
    cols[3].metric("verifier steps", gen["steps"])
    if not ref.empty:
        with st.expander("Prompt"):
            st.write(ref["prompt_text"].iloc[0])
    left, right = st.columns(2)
    with left:
        st.markdown("**Generated** (accepted draft tokens highlighted)")
        st.html(tables.highlight_html(_segments(f, gen)))
    with right:
        st.markdown("**Greedy reference**")
        st.html(tables.highlight_html([(ref["text"].iloc[0] if not ref.empty else "(no reference)", False)]))


def _segments(f: ui.Filters, gen: dict) -> list[tuple[str, bool]]:
    """Decoded step segments, or token ids when the spec's tokenizer cannot be loaded here."""
    steps = tables.segment_steps(gen["tokens"] or [], gen["accepted_per_step"] or [], gen.get("tokens_per_step"))
    name = spec_tokenizer(queries.spec(f.url, f.exp_id))
    tok = tokenizer(name) if name else None
    if tok is None:
        st.caption("Tokenizer not available here: showing token ids.")
        return tables.ids_segments(steps)
    return tables.decode_segments(steps, lambda ids: tok.decode(ids, skip_special_tokens=True))


f = ui.current_filters()
st.title("Texts")
redundancy(f)
drill_down(f)
