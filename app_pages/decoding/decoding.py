"""Decoding: inference one token at a time with a KV cache, for every variant (attention_core/decoding.py)."""

import dataclasses
import functools
import time
from dataclasses import replace

import streamlit as st

from app_pages.decoding.spec import SPEC
from attention_core.composed import parse_mask
from attention_core.decoding import bytes_read, cache_tokens, decode, decode_sentence, step_cost, step_flops
from attention_core.engine import composed_mask
from attention_core.masks import SINKS
from attention_core.tokens import tokenize
from attention_core.training import POSITIONS, continue_greedily, sentence_words, sentence_x
from attention_core.variants import VARIANTS
from figures.decoding import cache_and_rows_figure, cost_figures, step_figure
from figures.stages import made
from figures.style import markdown_literal
from ui.links import check_choice, check_whole
from ui.live_chart import show_figure
from ui.own_weights import own_refusal, own_weights_box
from ui.screen import reduced_motion, slide_columns, slide_pixels
from ui.show import friendly_errors, style_for
from ui.sidebar import current_settings
from ui.slides import PLAY_SECONDS, Slides
from ui.traces import given_weights, show_typed_refusals, typed_numbers
from ui.training import session_run, start, training_config

SENTENCE, TRAINED = "the sentence", "the trained model"  # where the next token comes from
LECTURE_PROMPT = ("Alice", "will", "eat")  # lecture 002's example
ROW_MAP_PIXELS = 60  # the height of a one-row map (the new token's q, weights and context)
SLIDE_MAP_PIXELS = 160  # in presentation mode, the tallest the cache and the rows so far may be
COST_CHART_PIXELS = 300  # in presentation mode, each of the cost slide's two charts (one above the other)


@st.cache_resource(max_entries=16, show_spinner="Decoding…")
def cached_decoding(text: str, config, typed: tuple, own: str = ""):
    given = given_weights(text, config, typed, own)
    x = given.pop("x", None)
    return decode_sentence(text, config, x=x, weights=given)


def _play(n: int, step_once: bool) -> None:
    """▶ play runs on, a step every PLAY_SECONDS, until ■ stop; where the browser asks for reduced motion,
    each click steps once (nothing moves on its own)."""
    if step_once:
        st.session_state["dec_step"] = min(st.session_state.get("dec_step", 1), n) % n + 1
        return
    st.session_state["dec_playing"] = not st.session_state.get("dec_playing", False)
    if st.session_state["dec_playing"] and st.session_state.get("dec_step", 1) >= n:
        st.session_state["dec_step"] = 1  # play from the start once at the end


def _train_now(config) -> None:
    with st.spinner("Training…"):
        start(config).join()


def _trained(settings):
    """The trained tiny model's decoding of a prompt, its words and next-word probabilities, and what to say."""
    config = training_config(settings)
    if not config.causal:
        raise ValueError(
            "the Training page's model was trained without the causal mask (train_causal = off): it "
            "read whole sentences at once, so it cannot write one word at a time; switch the mask on"
        )
    training = session_run(config)
    if training is None or training.running:
        st.info(
            f"No trained model of these settings yet (seed {config.seed}, d_model {config.d_model}, d_k "
            f"{config.d_k}, {config.heads} head{'s' if config.heads > 1 else ''}: the Training page's)."
        )
        st.button(
            f"Train it now ({config.steps:,} steps, a few seconds)",
            key="dec_train",
            type="primary",
            on_click=_train_now,
            args=(config,),
        )
        st.stop()
    run = training.run
    checkpoint = run.checkpoints[-1]
    why = ""
    try:
        words = sentence_words(tokenize(settings.text), run.vocabulary)[: POSITIONS - 1]
    except ValueError as error:
        words = LECTURE_PROMPT
        why = (
            f"The sidebar's sentence is not one this model can read ({error}); the prompt is lecture 002's "
            f"“{' '.join(words)}”."
        )
    continued = continue_greedily(checkpoint, run, words)
    decoding = decode(
        sentence_x(checkpoint, run.vocabulary, continued.words),
        run.config.attention(),
        weights=checkpoint.weights,
        tokens=list(continued.words),
    )
    return decoding, continued, run, why


@dataclasses.dataclass(frozen=True)
class Shown:
    """What both slides show: the decoding, the step and head chosen, and where the next token came from."""

    decoding: object
    t: int  # the step, from 0
    head: int
    continued: object = None  # the trained model's continuation, when the next token comes from it
    run: object = None  # ... and its run
    typed: dict = dataclasses.field(default_factory=dict)  # the typed numbers, when it comes from the sentence


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        style = style_for(settings)
        spec = SPEC
        if not settings.present:
            introduce(settings.config)
            own_weights_box(settings)
        show_typed_refusals(settings)
        check_choice("dec_source", "next token from", [SENTENCE, TRAINED])
        # Its widget is drawn below, in one row with the step: what it says decides the steps there are (the bar's).
        source = st.session_state.get("dec_source", st.query_params.get("dec_source"))
        source = source if source in (SENTENCE, TRAINED) else SENTENCE
        continued, typed, run = None, {}, None
        if source == TRAINED:
            decoding, continued, run, why = _trained(settings)
            if why:
                st.info(markdown_literal(why))
        else:
            typed, _ = typed_numbers(settings) if settings.typed else ({}, [])
            own = "" if own_refusal(settings.own, settings.config, settings.text) else settings.own
            decoding = cached_decoding(settings.text, settings.config, tuple(sorted(typed.items())), own)
            typed = {**dict.fromkeys(decoding.params if own else ()), **typed}  # what was given, by name
        n = len(decoding.tokens)
        if "dec_next" in st.session_state:  # ▶ play's next step, set on the run before, taken before the slider
            st.session_state["dec_step"] = st.session_state.pop("dec_next")
        slides = Slides(
            spec.title, spec.slide_key, dict(spec.slides), settings.present, inner={"step": ("dec_step", n)}
        )
        slides.steer()
        check_whole("dec_step", "step", 1, n)
        if st.session_state.get("dec_step", 1) > n:  # a shorter sentence than the step shown: its last step
            st.session_state["dec_step"] = n
        t, head = controls_row(n, decoding.config.heads)  # one head for Q = K = V = X: its config says so
        shown = Shown(decoding, t, head, continued, run, typed)
        if slides.shows("step"):
            step_slide(shown, settings, style)
        if slides.shows("cost"):
            cost_slide(shown, style, settings.present)


def introduce(config) -> None:
    st.title("Decoding, one token at a time")
    st.markdown(
        "A decoder writes one token per step. At each step only the **new** token's query is made; the keys "
        "and values of the tokens before it were made at earlier steps and wait in the "
        f"[KV cache](glossary#kv-cache). Its row of attention is the same row {markdown_literal(kept_by(config))} "
        "leaves in the full matrix: decoding computes that matrix one row at a time."
    )


def kept_by(config) -> str:
    """The mask whose rows a decoder computes, in words: a composition (with the causal mask), a sliding window
    (and its sinks), or the causal mask (decoding.decoded_mask)."""
    if config.mask:
        return f"the composed mask ({parse_mask(composed_mask(config)).words()})"
    if config.window:
        return f"the sliding window of {config.window}" + (f" with the first {SINKS}" if config.sinks else "")
    return "the causal mask"


def controls_row(n: int, heads: int) -> tuple[int, int]:
    """One row of controls on both slides: where the next token comes from, the step, ▶ play, the head. Returns
    the step (from 0) and the head."""
    where_from, left, middle, right = st.columns([2.6, 4, 1.2, 1.6], vertical_alignment="bottom")
    where_from.segmented_control(
        "next token from",
        [SENTENCE, TRAINED],
        default=SENTENCE,
        key="dec_source",
        bind="query-params",
        help="The sentence's next word (teacher forcing), or the Training page's tiny model's greedy guess",
    )
    t = 0
    if n > 1:
        t = (
            left.slider(
                "step",
                1,
                n,
                value=n,
                key="dec_step",
                bind="query-params",
                help="Which token is the new one: ← → step in presentation mode",
            )
            - 1
        )
        with middle:
            still = reduced_motion()
        if still:
            st.session_state["dec_playing"] = False
        label = "▶ step" if still else "■ stop" if st.session_state.get("dec_playing") else "▶ play"
        middle.button(
            label,
            on_click=_play,
            args=(n, still),
            key="dec_play",
            width="stretch",
            help="Your browser asks for reduced motion: each click steps once."
            if still
            else "Steps through the tokens on its own, until ■ stop.",
        )
    check_choice("dec_head", "head", [f"head {i + 1}" for i in range(heads)])
    head = 0
    if heads > 1:
        head = (
            right.selectbox(
                "head", range(heads), format_func=lambda i: f"head {i + 1}", key="dec_head", bind="query-params"
            )
            or 0
        )
        head = min(head, heads - 1)
    return t, head


def step_slide(shown: Shown, settings, style) -> None:
    """The step: the new token's query against the cache, and the next word where the trained model writes."""
    decoding, t, head, continued, run, typed = (
        shown.decoding,
        shown.t,
        shown.head,
        shown.continued,
        shown.run,
        shown.typed,
    )
    config = decoding.config
    n = len(decoding.tokens)
    step = decoding.steps[t]
    weights_are = "trained" if continued else made(set(typed), set(decoding.params), settings.typed_as)
    where = (
        "the model's own guess"
        if continued and t >= continued.prompt
        else "from the prompt"
        if continued
        else "the sentence's next word (teacher forcing)"
    )
    read = len(step.keys)  # t + 1, or what a sliding window has left in the cache
    keys = f"{read} key{'s' if read > 1 else ''}"
    if read < t + 1:
        keys += f" (the {'mask' if config.mask else 'window'} has dropped {t + 1 - read})"
    if settings.present:  # a slide keeps to one line (the source is on the slide, in its choice)
        line = f"“{markdown_literal(step.token)}”, its query meets {keys}" + ("; grey: not recomputed" if t else "")
    else:
        line = (
            f"the new token is “{markdown_literal(step.token)}”, {where}. Its query meets the {keys} in the "
            f"cache, its own included; nothing else is computed"
        )
    st.markdown(f"**Step {t + 1} of {n}**: {line}. {VARIANTS[config.variant].label}, {weights_are} weights.")
    if continued and t < len(continued.next_word):
        probabilities = continued.next_word[t]
        top = probabilities.topk(5)
        guess = run.vocabulary[int(top.indices[0])]
        st.markdown(
            f"**Next word**: “{guess}” ({float(top.values[0]):.1%}), from x + this step's output, "
            "through the unembedding"
        )
        st.dataframe(
            [
                {"next word": run.vocabulary[int(i)], "probability": round(float(p), 4)}
                for p, i in zip(top.values, top.indices, strict=True)
            ],
            hide_index=True,
        )
    elif continued:
        st.caption(f"The last of the model's {POSITIONS} learned positions: it predicts no word after it.")
    # One-row maps need little height, and on a slide the cache and the rows share what is left of 900 pixels.
    show_figure(step_figure(decoding, t, head, replace(style, max_map_pixels=ROW_MAP_PIXELS)), "dec-step")
    below = replace(style, max_map_pixels=slide_pixels(SLIDE_MAP_PIXELS)) if settings.present else style
    show_figure(cache_and_rows_figure(decoding, t, head, below), "dec-cache")
    if t and not settings.present:
        st.caption(
            f"Grey: not recomputed at this step. The cache's rows of the {read - 1} earlier "
            f"token{'s' if read > 2 else ''} are read as they were kept, and the rows of attention above the "
            "last were made at earlier steps."
        )
    if st.session_state.get("dec_playing"):
        if t + 1 < n:
            time.sleep(PLAY_SECONDS)
            st.session_state["dec_next"] = t + 2
        else:
            st.session_state["dec_playing"] = False
        st.rerun()


def cost_slide(shown: Shown, style, presentation: bool) -> None:
    """What the step costs with a KV cache and without: FLOPs term by term, bytes read, and both as t grows. On a
    slide the words (the terms with the cache only) beside the two charts, one above the other."""
    decoding, t, config = shown.decoding, shown.t + 1, shown.decoding.config  # t: tokens seen at this step
    words, charts = slide_columns() if presentation else (st.container(), st.container())
    with words:  # on a slide the charts beside the words start at the top
        st.header(f"What step {t} costs, one layer ({VARIANTS[config.variant].label})")
        cost_words(decoding, t, presentation)
    with charts:
        cost_charts(decoding, len(decoding.tokens), style, presentation)


def cost_words(decoding, t: int, presentation: bool) -> None:
    """The step's FLOPs with the cache and without, term by term, and the bytes it reads."""
    config = decoding.config
    sizes, bytes_per = config.sizes, decoding.x.element_size()
    keys = len(decoding.steps[t - 1].keys)  # what the cache holds: t, or fewer under a sliding window
    rows = []
    for cached in (True, False) if not presentation else (True,):
        for term in step_cost(config.variant, sizes, t, cached, keys):
            how = "with a KV cache" if cached else "without"
            rows.append({"": how, "work": term.what, "formula": term.formula, "FLOPs": f"{term.flops:,}"})
    with_cache, without = step_flops(config.variant, sizes, t, True, keys), step_flops(config.variant, sizes, t, False)
    if keys < t and presentation:
        st.markdown(f"The window's cache holds {keys} of the {t} tokens: t below is {keys}, at any length.")
    elif keys < t:
        st.markdown(
            f"Under the sliding window the cache holds {keys} of the {t} tokens: with the cache, t in the formulas "
            f"below is {keys}, and it stays {keys} however long the text grows."
        )
    st.markdown(
        f"With the cache, step {t} computes **{with_cache:,}** FLOPs; without it, the whole pass over all "
        f"{t} tokens again: **{without:,}** ({without / with_cache:.1f}×)."
        + ("" if presentation else " FLOPs of the matrix products, 2 per multiply-add; the softmax and scaling add "
           "a few per score and are not counted.")
    )  # fmt: skip
    st.table([{k: v for k, v in row.items() if k or not presentation} for row in rows], border="horizontal")
    read_with = bytes_read(decoding.params, decoding.cache_at(t), decoding.x[:t], True)
    read_without = bytes_read(decoding.params, {}, decoding.x[:t], False)
    per_token = VARIANTS[config.variant].cache_per_token(sizes)
    cache = (
        f"**Cache**: {VARIANTS[config.variant].formula_worked(sizes)} numbers per token "
        f"({per_token * bytes_per:,} bytes in {config.dtype}); after {t} "
        f"token{'s' if t > 1 else ''}: {decoding.cache_bytes(t):,} bytes."
    )
    if presentation:
        st.markdown(f"{cache} **Read** at this step: {read_with:,} bytes with it, {read_without:,} without.")
        return
    st.markdown(
        f"{cache} **Read from memory** at this step, at "
        f"the least: {read_with:,} bytes with the cache (every weight, the whole cache, the new row of X), "
        f"{read_without:,} without (every weight, all {t} rows of X): {with_cache / read_with:.2f} FLOPs per byte "
        "read with the cache. The cache trades memory for compute. It is read whole at every step, for a few "
        "FLOPs per byte: in a large model a decoding step waits on memory more than on arithmetic."
    )


def cost_charts(decoding, n: int, style, presentation: bool) -> None:
    """A step's FLOPs and the cache as t grows: side by side, or on a slide one above the other."""
    config = decoding.config
    steps_shown = max(64, 2 * n)
    held = functools.partial(cache_tokens, config)  # a sliding window's cache stops growing
    height = slide_pixels(COST_CHART_PIXELS) if presentation else None
    flops_figure, cache_line = cost_figures(
        config.variant, config.sizes, steps_shown, decoding.x.element_size(),
        style if presentation else style.beside(2), held, height,
    )  # fmt: skip
    places = (st.container(), st.container()) if presentation else st.columns(2)
    with places[0]:
        show_figure(flops_figure, "dec-flops")
    with places[1]:
        show_figure(cache_line, "dec-cache-growth")
    most = held(steps_shown)
    with_one = (
        f"with one with t until its cache holds {most} tokens (the sliding window), then not at all. Over a whole "
        "text of n tokens: n³ against n"
        if most < steps_shown
        else "with one with t. The sum over a whole text of n tokens: n³ against n²"
    )
    if not presentation:
        growth = f"Both up to t = {steps_shown}: without a cache each step grows with t² (every score again)"
        st.caption(f"{growth}, {with_one}.")


main()
