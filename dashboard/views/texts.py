"""Texts: Table 5 (redundancy of the generated texts) and one generation beside its greedy reference."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import streamlit as st

from analysis import tables
from dashboard import background, reads, tokens, ui
from dashboard.app import page_filters

POLL_S = 1  # how often the drill-down checks whether the tokenizer has finished loading


@st.cache_resource(show_spinner=False)
def _tokenizer_future(name: str) -> Future:
    """Load the tokenizer in a background thread, once per server: the page never waits for it."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenizer").submit(tokens.load_offline, name)


def redundancy(f: ui.Filters, was_busy: bool = False) -> None:
    """Table 5 for the whole experiment, computed once per data version in the background; the selection picks rows."""
    key = ("table5", f.url, f.exp_id)
    frame, busy = background.latest(key, f.version, lambda: reads.redundancy(f.url, f.exp_id))
    if was_busy and not busy:
        st.rerun()  # the new table is ready: redraw once, which also stops the timer
    spec = tables.PAPER_TABLES["table5"]
    if frame is None:
        st.subheader(spec.title)
        failed = background.error(key)
        st.info(
            f"Table 5 could not be computed: {failed}"
            if failed
            else "Computing Table 5 over every generated text in the background; it appears here when ready."
        )
    else:
        sel = f.selection
        if sel.tasks:
            frame = frame[frame["task"].isin(sel.tasks)]
        if sel.strategies:
            frame = frame[frame["strategy"].isin((*sel.strategies, "reference"))]
        ui.metric_table_block(tables.redundancy_table(frame, spec.metrics), spec.title, spec.metrics, "table5")
        if note := tables.gzip_note(frame):
            st.warning(note, icon=":material/info:")
    st.caption(
        "Within-text 4-gram repetition, cross-document 4-gram overlap and gzip ratio, one text per prompt."
        + (" Updating with new results…" if busy and frame is not None else "")
    )


def drill_down(f: ui.Filters) -> None:
    """One generation (cascading pickers) beside its reference, accepted draft tokens highlighted."""
    st.subheader("One generation")
    gen_id = ui.generation_picker(f, "texts")
    gen = reads.generation(f.url, gen_id) if gen_id is not None else None
    if gen is None:
        st.info("No generation in this selection.")
        return
    ref = reads.reference(f.url, f.exp_id, gen["task"], gen["prompt_index"])
    cols = st.columns(4)
    cols[0].metric("ROUGE-L", "–" if gen["rouge_l"] is None else f"{gen['rouge_l']:.3f}")
    cols[1].metric("exact match", {True: "yes", False: "no"}.get(gen["exact_match"], "–"))
    cols[2].metric("acceptance", "–" if gen["acceptance"] is None else f"{gen['acceptance']:.1%}")
    cols[3].metric("verification rounds", len(gen["accepted_per_step"] or []))
    if ref is not None:
        with st.expander("Prompt"):
            st.write(ref["prompt_text"])
    left, right = st.columns(2)
    with right:
        st.markdown("**Greedy reference**")
        st.html(tables.highlight_html([(ref["text"] if ref is not None else "(no reference)", False)]))
    with left:
        st.markdown("**Generated** (accepted draft tokens highlighted)")
        name = tokens.tokenizer_name(reads.spec(f.url, f.exp_id))
        future = _tokenizer_future(name) if name else None
        loading = future is not None and not future.done()
        st.fragment(run_every=POLL_S if loading else None)(generated)(gen, future, name, loading)


def generated(gen: dict, future: Future | None, name: str | None, was_loading: bool) -> None:
    """The generated text: decoded and highlighted once the tokenizer is ready; the stored text until then."""
    if was_loading and future is not None and future.done():
        st.rerun()  # loaded: redraw once without the timer
    steps = tables.segment_steps(gen["tokens"] or [], gen["accepted_per_step"] or [], gen.get("tokens_per_step"))
    if future is not None and not future.done():
        st.caption(f"Loading the tokenizer `{name}` in the background; highlighting follows.")
        st.html(tables.highlight_html([(gen["text"] or "", False)]))
        return
    failed = future.exception() if future is not None else None
    if future is None or failed is not None:
        why = str(failed) if failed is not None else "the spec names no tokenizer"
        st.caption(f"Showing token ids: {why}.")
        st.html(tables.highlight_html(tables.ids_segments(steps)))
        return
    tok = future.result()
    st.html(tables.highlight_html(tables.decode_segments(steps, lambda ids: tok.decode(ids, skip_special_tokens=True))))


f = page_filters()
_, table5_busy = background.latest(("table5", f.url, f.exp_id), f.version, lambda: reads.redundancy(f.url, f.exp_id))
st.fragment(run_every=POLL_S if table5_busy else None)(redundancy)(f, table5_busy)
drill_down(f)
