"""Real model: the attention a trained transformer computes, every layer and head, then one head stage by stage."""

import dataclasses

import streamlit as st

from attention_core import MAX_MODEL_TOKENS, causal_mask, rerun_head, resolve_device
from attention_core.lectures import weight_text
from attention_core.models import WORD_START, available_models
from attention_core.models.capture import PROBE_HALF
from attention_core.models.generation import MAX_NEW_TOKENS
from attention_core.reading import merge_words, merged_tokens, rollout, weighted_norms, word_groups
from attention_core.statistics import ROLES, STATISTICS, top_heads
from figures.decoding import generated_row_figure, step_entropy_figure
from figures.glossary import link
from figures.overview import entropy_grid_figure, head_labels, layer_labels, thumbnails_figure
from figures.reading import (
    SINK_SHARE,
    SINK_WHY,
    SINK_WHY_SHORT,
    drawn_on,
    norms_figure,
    rollout_figure,
    sink_summary,
    special_shares,
    statistic_grid_figure,
    without_first_figure,
    words_figure,
)
from figures.stages import stage_view, stages_for
from figures.style import markdown_literal
from ui import slides as slide_state
from ui.controls import check_choice, check_whole, current_settings, keep_in_address, take_keyed_choice
from ui.memo import remember
from ui.pages import BY_TITLE
from ui.real import GENERATION, generate, model_for, model_trace_for, probe_trace
from ui.show import SIDE_BY_SIDE_MAX, friendly_errors, show_figure, show_stage, slide_columns, slide_pixels, style_for
from ui.slides import Slides

CHOSEN_MODEL = "rm_model_chosen"  # session state: the model this page last showed (by key)

GRID_LABELS = 60  # pixels: how much shorter the entropy grid is on a slide than a map (see its slide)
TOP_HEADS = 5  # heads listed under the role grid, highest first
ROLE_ROWS = 150  # pixels: on a slide the grids leave room for the role picker above them and the top heads below


def _fixed_by_architecture(info) -> None:
    st.markdown(
        "**What the architecture fixes** (the trained weights have these shapes; the sidebar's sizes, mask, "
        "scaling, seed and init do not apply here and are greyed out)"
    )
    st.dataframe(
        [
            {"": "kind", "value": info.kind},
            {"": "layers", "value": str(info.n_layers)},
            {"": "query heads per layer", "value": str(info.n_heads)},
            {"": "key/value heads per layer", "value": str(info.n_kv_heads)},
            {"": "d_k (per head)", "value": str(info.d_k)},
            {"": "d_model", "value": str(info.d_model)},
            {"": "scale", "value": f"1/√{info.d_k}"},
            {"": "positions", "value": info.positions},
            {"": "tokens shown at most", "value": f"{info.token_cap} (model maximum {info.max_positions})"},
        ],
        hide_index=True,
    )


def _head_sharing_note(model_trace, head: int) -> str:
    kv = model_trace.kv_head_of[head]
    sharing = model_trace.heads_sharing(kv)
    if len(sharing) == 1:
        return f"Head {head + 1} has its own keys and values."
    others = ", ".join(str(h + 1) for h in sharing)
    return (
        f"[Grouped-query attention](glossary#gqa): query heads {others} all read key/value head {kv + 1}, so their "
        "K and V below are the same matrices; only Q differs."
    )


def sink_note(layer_trace, head: int, special: bool) -> str:
    """The attention-sink note for a head that parks most of its attention on the first token ("" if it does not)."""
    share = float(layer_trace.statistic("first")[head])  # NaN for one token
    if not share >= SINK_SHARE or layer_trace.n_tokens < 3:
        return ""
    first = markdown_literal(layer_trace.tokens[0])
    why = (
        f"“{first}” is a special token, a usual parking place."
        if special
        else f"This model starts with no special token, so the first word, “{first}”, takes that role."
    )
    return (
        f"This head puts **{share:.0%}** of its attention on the first token, on average over rows 2–"
        f"{layer_trace.n_tokens}: an [attention sink](glossary#attention-sink), where a head parks attention that has "
        f"nowhere better to go. {why} A large weight on it says little about meaning."
    )


def _head_weights(layer_trace, head: int, style):
    """The head's weights map as its stage view draws it, kept with the trace (a slide redraws it per press)."""
    return remember(layer_trace, ("head weights", head, style),
                    lambda: stage_view(layer_trace, "weights", head, style).figures[0])  # fmt: skip


def _what_if_causal(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """The head re-run with a causal mask (an encoder's): beside its weights read normally; on its slide, the
    head's weights until the switch is on, then the what-if in their place."""
    layer_trace = model_trace.layers[layer]
    words, pictures = places
    with words:
        (st.header if presentation else st.subheader)("What if this head were causal?")
        on = st.toggle("what if causal", value=False, key="rm_whatif", bind="query-params")
        if on:
            st.info(
                "A one-head what-if: this head's captured q, k and scale with a causal mask added. The model was "
                "trained without a mask and its other heads and layers are unchanged, so this is not what a causal "
                "model would do."
            )
        else:
            st.caption("Switch on to hide each token's future from this one head and see how its weights change.")
    if not on:
        if presentation:
            with pictures:
                show_figure(_head_weights(layer_trace, head, style), "rm-whatif")
        return
    what_if = rerun_head(
        layer_trace, head, causal_mask(layer_trace.n_tokens), label=f"what if causal · head {head + 1}"
    )
    changed = stage_view(what_if, "weights", 0, style).figures[0]
    with pictures:
        if presentation:
            show_figure(changed, "rm-whatif")
            return
        left, right = st.columns(2)
        with left:
            show_figure(_head_weights(layer_trace, head, style), "rm-actual")
        with right:
            show_figure(changed, "rm-whatif")


def _open_head(layer: int, head: int, presentation: bool) -> None:
    """A head chosen from the role grid's list: its weights, in the stage views below (or on their slide)."""
    st.session_state["rm_layer"], st.session_state["rm_head"] = layer, head
    if presentation:
        st.session_state[slide_state.WANTED] = "weights"
    else:
        st.session_state[slide_state.SCROLL_TO] = slide_state.anchor("weights")


def _roles(key: str, device: str, model_trace, hide_first: bool, style, presentation: bool) -> None:
    """Which heads do what: a role's score for every layer and head (attention_core.statistics), beside the
    entropy grid, its definition, and its top heads, each a button that opens it in the stage views."""
    check_choice("rm_role", "role", [role.key for role in ROLES])
    shown = "collapsed" if presentation else "visible"
    chosen = st.segmented_control("head role", [role.key for role in ROLES], format_func=lambda k: STATISTICS[k].name,
                                  default="previous", key="rm_role", bind="query-params",
                                  label_visibility=shown) or "previous"  # fmt: skip
    role = STATISTICS[chosen]
    source = probe_trace(key, device) if role.probe else model_trace
    leave_out = hide_first and role.key != "first"
    grid = source.grid(role.key, leave_first_out=leave_out)
    on = "the probe: random tokens, twice" if role.probe else "this sentence"
    without = ", first token left out" if leave_out else ""
    half = style.beside(2)
    entropy_place, role_place = st.columns(2)
    with entropy_place:
        show_figure(remember(model_trace, ("entropy", half), lambda: entropy_grid_figure(model_trace, half)),
                    "rm-entropy")  # fmt: skip
    with role_place:
        figure = statistic_grid_figure(grid.numpy(), role, layer_labels(model_trace), head_labels(model_trace),
                                       f"on {on}{without}", half)  # fmt: skip
        show_figure(figure, "rm-role")
    lens = f" TransformerLens calls it {role.lens} (where it scores differently, see the README)." if role.lens else ""
    probe = (f" The probe: {len(source.tokens)} tokens, {PROBE_HALF} random whole words then the same again, "
             "with the model's special tokens." if role.probe else "")  # fmt: skip
    left_out = (" Here the first token is left out: its weight is taken from each row and the rest re-normalized."
                if leave_out else "")  # fmt: skip
    st.caption(f"**{link(role.name.capitalize(), 'head roles')}**, 0 to 1: {role.definition} A head's score is the "
               "mean over the rows "
               f"that have such a key.{probe}{left_out}{lens}")  # fmt: skip
    best = top_heads(grid, TOP_HEADS)
    if not best:
        st.caption(f"No row of {on} has such a key: no head has a score.")
        return
    row = st.container(horizontal=True, gap="small")
    row.markdown("**Highest:**")
    for layer, head, value in best:  # (without the key/value head, which the stage views name: five fit a row)
        row.button(f"layer {layer + 1} · head {head + 1}: {weight_text(value)}", key=f"rm_top_{layer}_{head}",
                   on_click=_open_head, args=(layer, head, presentation), help="Open this head's weights")  # fmt: skip


def _rollout(model_trace, words: bool, hide_first: bool, style) -> None:
    """Attention rollout (attention_core.reading): one map through the first L layers, and per token what it
    draws on; by words where the switch says so, without the first token for display where that one does."""
    layers = len(model_trace.layers)
    check_whole("rm_upto", "through layer", 1, layers)
    depth, token = st.columns(2, vertical_alignment="bottom")  # one row: on a slide the map takes the rest
    upto = depth.slider("through layer", 1, layers, value=layers, key="rm_upto", bind="query-params")
    rolled = rollout([layer.weights for layer in model_trace.layers], upto)
    tokens = model_trace.tokens
    if words and model_trace.words:
        groups = word_groups(list(model_trace.words))
        rolled, tokens = merge_words(rolled.unsqueeze(0), groups)[0], merged_tokens(tokens, groups)
    row = token.selectbox(
        "what does this token draw on",
        range(len(tokens)),
        format_func=lambda i: tokens[i],
        index=len(tokens) - 1,
        key=f"rm_token_at_{len(tokens)}",
    )  # a key per length: words on/off
    show_figure(rollout_figure(rolled.numpy(), tokens, upto, layers, style, hide_first), "rm-rollout")
    st.markdown(drawn_on(rolled.numpy(), tokens, min(row or 0, len(tokens) - 1), hide_first=hide_first))


def _without_first(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """The head's weights with the first token hidden and each row re-normalized, for display only."""
    trace = model_trace.layers[layer]
    words, pictures = places
    with words:
        (st.header if presentation else st.subheader)("Without the first token")
        note = sink_note(trace, head, model_trace.special[0])
        st.markdown(
            f"{note + ' ' if note and presentation else ''}The first token's column is greyed and each row "
            "re-normalized over the other keys: what this head does with the attention it does not park there. "
            "For display only: the head's captured weights, their numbers and exports keep the first token."
        )
    allowed = None if trace.mask is None else trace.mask.cpu().numpy()
    with pictures:
        figure = without_first_figure(trace.weights[head].cpu().numpy(), trace.tokens, allowed,
                                      f"layer {layer + 1} · head {head + 1}", style)  # fmt: skip
        show_figure(figure, "rm-without-first")


def _by_words(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """The head's weights by words (reading.merge_words), where a word was split into pieces."""
    words, pictures = places
    groups = word_groups(list(model_trace.words))
    split = len(groups) < len(model_trace.tokens)
    with words:
        if presentation:
            st.header("By words, not pieces")
        if not split:
            st.caption("Words, not pieces: no word of this sentence is split, so the head's map is already by words.")
        elif presentation:
            st.markdown("A word's row is the mean of its pieces' rows, its column the sum of their columns, so each "
                        "row still sums to 1. Hover a word to see its pieces.")  # fmt: skip
    if not split:
        if presentation:  # the slide shows the head's map, which is already by words
            with pictures:
                show_figure(_head_weights(model_trace.layers[layer], head, style), "rm-words")
        return
    trace = model_trace.layers[layer]
    merged = merge_words(trace.weights[head : head + 1].cpu(), groups)[0].numpy()
    pieces = [" + ".join(model_trace.tokens[i] for i in group) for group in groups]
    with pictures:
        show_figure(words_figure(merged, merged_tokens(model_trace.tokens, groups), pieces,
                                 f"layer {layer + 1} · head {head + 1}", style), "rm-words")  # fmt: skip


def _norm_based(model_trace, layer: int, head: int, style, places: tuple, presentation: bool) -> None:
    """Norm-based attention (Kobayashi et al. 2020) for the head shown: ‖α_ij·v_j·W_O^h‖ beside α_ij."""
    trace = model_trace.layers[layer]
    norms = weighted_norms(trace.weights[head : head + 1], model_trace.value_norms[layer][head : head + 1])[0]
    allowed = None if trace.mask is None else trace.mask.cpu().numpy()
    words, pictures = places
    with words:
        (st.header if presentation else st.subheader)("What each weight moves")
    with pictures:
        show_figure(norms_figure(norms.numpy(), trace.tokens, allowed, f"layer {layer + 1} · head {head + 1}",
                                 style), "rm-norms")  # fmt: skip
    with words:
        st.caption("Kobayashi et al. (2020): the head's output for token i is Σ_j α_ij · v_j·W_O, a sum of vectors, "
                   "one per key. A large weight on a token whose vector v_j·W_O is short moves little: this map is "
                   "the length of each term, to read beside the weights. Summed over j the terms give the "
                   "head's output (checked against the model's own W_O).")  # fmt: skip


def beside_weights(model_trace) -> dict[str, str]:
    """The head's weights read four more ways, each a slide after the weights' own (key: title): without the first
    token, what each weight moves (where the model's W_O is known), by words, and, for an encoder, what if causal.
    Read normally each is drawn under the weights where its switch is on."""
    beside = {"without_first": "Without the first token"}
    if model_trace.value_norms:
        beside["norms"] = "What each weight moves"
    if model_trace.words:
        beside["words"] = "By words, not pieces"
    if not model_trace.info.causal:
        beside["whatif"] = "What if causal"
    return beside


def _read_beside(model_trace, reads: dict[str, str], layer: int, head: int, hide_first: bool, words: bool,
                 slides, settings) -> None:  # fmt: skip
    """The parts of beside_weights: on a slide each fills its own (words left, figure right); read normally, the
    ones whose switch is on (hiding the first token, words), what each weight moves, and for an encoder, what if
    causal, one under the other."""
    presentation = settings.presentation
    trace = model_trace.layers[layer]
    if presentation:
        style = style_for(settings, side_by_side=True, slide=True)
    else:
        style = style_for(settings, side_by_side=trace.n_tokens <= SIDE_BY_SIDE_MAX)
    parts = {
        "without_first": (_without_first, hide_first),
        "norms": (_norm_based, True),
        "words": (_by_words, words),
        "whatif": (_what_if_causal, True),
    }  # (draw, read normally when)
    for key in reads:
        draw, wanted = parts[key]
        if slides.shows(key) and (presentation or wanted):
            places = slide_columns() if presentation else (st.container(), st.container())
            draw(model_trace, layer, head, style, places, presentation)


def _ask_to_generate() -> None:
    st.session_state["rm_go"] = True


def _generation(key: str, device: str, text: str, info, model_trace, style) -> None:
    """A causal model writes after the sidebar's sentence, greedily, with its own KV cache; a scrubber over
    the prompt and every token written shows each one's attention row, the heads' peakiness, the next-token
    probabilities and the cache's size at that point."""
    st.header("Writing, one token at a time")
    if not info.causal:
        st.info(f"{info.title} is an encoder: it reads a sentence whole and writes no next token. Choose a causal "
                "decoder (SmolLM2) to watch one write.")  # fmt: skip
        return
    check_whole("rm_new", "new tokens", 1, MAX_NEW_TOKENS)
    count_place, go, stop = st.columns([2, 1, 1], vertical_alignment="bottom")
    count = count_place.number_input("new tokens", 1, MAX_NEW_TOKENS, value=8, key="rm_new", bind="query-params")
    kept = st.session_state.get(GENERATION, {}).get((key, device, text, count))
    go.button("▶ Generate", key="rm_generate", type="primary", width="stretch", on_click=_ask_to_generate)
    if st.session_state.pop("rm_go", False):
        stop.button("■ Stop", key="rm_stop", width="stretch")  # a click reruns the page: the loop ends, the tokens stay
        kept = generate(key, device, text, count)
    if kept is None:
        st.caption(f"Greedy: each new token is the most probable one, written after the sidebar's sentence with "
                   f"the model's own KV cache (transformers' DynamicCache), every layer's attention captured at "
                   f"each step. Up to {MAX_NEW_TOKENS} new tokens.")  # fmt: skip
        return
    written = kept.written
    ending = ("it wrote its end-of-text token" if kept.ended else f"all {count} asked for" if kept.done
              else f"stopped after {written} of {count}")  # fmt: skip
    text_written = "".join(p.token for p in kept.positions[kept.prompt :]).replace(WORD_START, " ")
    st.markdown(f"**Written** ({written} token{'s' if written != 1 else ''}, {ending}): "
                f"{markdown_literal(text_written)}")  # fmt: skip
    tokens = [p.token for p in kept.positions]
    at = st.select_slider("position", options=range(len(tokens)), value=len(tokens) - 1, key="rm_gstep",
                          format_func=lambda i: f"{style.index(i)}: {tokens[i]}" + (" (new)" if i >= kept.prompt
                                                                                      else ""))  # fmt: skip
    position = kept.positions[at]
    left, right = st.columns(2)
    layer = left.selectbox("layer ", range(info.n_layers), format_func=lambda i: f"layer {i + 1}", key="rm_glayer")
    labels = head_labels(model_trace)
    head = right.selectbox("head ", range(info.n_heads), format_func=lambda i: labels[i], key="rm_ghead")
    made = "written at this step, from the cache" if position.generated else "in the prompt, read in one pass"
    bytes_now = kept.cache_bytes_per_position * position.cached
    st.markdown(
        f"“{markdown_literal(position.token)}” ({made}). The cache now holds {position.cached} positions: "
        f"{info.n_layers} layers × {info.n_kv_heads} key/value heads × {position.cached} positions × "
        f"{info.d_k} × 2 (K and V) × 4 bytes = **{bytes_now:,} bytes**."
    )
    show_figure(generated_row_figure(tokens[: at + 1], position.rows[layer, head].numpy(),
                                     f"layer {layer + 1} · {labels[head]}", style), "rm-gen-row")  # fmt: skip
    grid, top = st.columns([3, 2])
    with grid:
        if position.rows.shape[-1] > 1:
            show_figure(step_entropy_figure(position.rows.numpy(), labels, style.beside(2)), "rm-gen-grid")
        else:
            st.caption("The first token has one key, itself: every head's weight on it is 1.")
    with top:
        st.markdown("**Next token, most probable first**")
        st.dataframe([{"token": token, "probability": round(p, 4)} for token, p in position.top], hide_index=True)


with friendly_errors():
    settings = current_settings()
    style = style_for(settings)
    if not settings.presentation:
        st.title("A real trained transformer")
        st.markdown(
            "Random weights show the mechanism; trained weights show what it learns. The sentence from the sidebar "
            "goes through a real model, and every layer's attention is captured from its own forward pass."
        )
    sources = available_models()
    take_keyed_choice("rm_model", "model", {key: source.title for key, source in sources.items()})
    if "rm_model" not in st.session_state and st.session_state.get(CHOSEN_MODEL) in sources:
        st.session_state["rm_model"] = st.session_state[CHOSEN_MODEL]  # back on the page: the model it showed
    # On a slide one row holds the model, and on a stage's slide the layer and head (their choices name themselves).
    row = st.columns([2, 1, 1], vertical_alignment="bottom") if settings.presentation else (st, None, None)
    shown = "collapsed" if settings.presentation else "visible"
    # Not bound to the address by Streamlit, which would write the title there: the key goes there instead.
    key = row[0].selectbox("model", tuple(sources), format_func=lambda k: sources[k].title, key="rm_model",
                           label_visibility=shown)  # fmt: skip
    keep_in_address("rm_model", key, next(iter(sources)))
    st.session_state[CHOSEN_MODEL] = key  # a widget's own state is forgotten on another page; this is not
    device = str(resolve_device(settings.config.device))
    model_for(key, device, box=not settings.presentation)
    model_trace = model_trace_for(key, device, settings.text)
    info = model_trace.info

    spec = BY_TITLE["Real model"]
    heads_stages = stages_for(model_trace.layers[0])  # every layer has the same stages
    head_reads = beside_weights(model_trace)  # the weights read more ways: slides after theirs
    titles = dict(spec.slides)
    for stage in heads_stages:
        titles[stage.key] = stage.label
        if stage.key == "weights":
            titles.update(head_reads)
    slides = Slides(spec.title, spec.slide_key, titles, settings.presentation)
    slides.steer()
    if model_trace.truncated:
        st.warning(
            f"The sentence has {model_trace.total_tokens} tokens for this model; only the first "
            f"{len(model_trace.tokens)} are shown (at most {MAX_MODEL_TOKENS}, so that 30 layers of maps stay fast)."
        )
    if slides.shows("tokens"):
        # On a slide the tokens and the architecture side by side, so that both fit one screen.
        tokens_place, fixed_place = st.columns(2) if settings.presentation else (st.container(), st.container())
        with tokens_place:
            st.markdown(f"**{len(model_trace.tokens)} tokens, exactly as the model's tokenizer makes them**")
            st.code("  ".join(f"{style.index(i)}:{t}" for i, t in enumerate(model_trace.tokens)), language=None,
                    wrap_lines=True)  # fmt: skip
            st.caption(
                f"{WORD_START} marks a token that starts a new word (the tokenizer's leading space); special tokens "
                "([CLS], [SEP]) are shown; '##ing' continues the word before it; ↵ is a newline, ␣ a space, "
                "⟨f0 9f⟩ the bytes of part of a character."
            )
        with fixed_place:
            _fixed_by_architecture(info)

    # The display switches: on a slide of the whole model, in the row beside the model; read normally, under it.
    switches = row[1:] if settings.presentation else st.columns(2)
    if not settings.presentation or slides.shown in ("grid", "thumbs", "sinks", "rollout"):
        hide_first = switches[0].toggle("hide the first token", key="rm_hide_first", bind="query-params",
                                        help="Grey its column out and re-normalize the other weights, for display "
                                        "only (the role scores leave it out too); captured numbers and exports "
                                        "keep it")  # fmt: skip
        words = switches[1].toggle("words, not pieces", key="rm_words", bind="query-params",
                                   help="Merge a word's pieces in the thumbnails, the rollout and (read normally) "
                                   "the head's weights: its row is the mean of theirs, its column the sum, so rows "
                                   "still sum to 1")  # fmt: skip
    else:
        hide_first, words = st.session_state.get("rm_hide_first", False), st.session_state.get("rm_words", False)

    if slides.shows("grid"):
        if not settings.presentation:  # on a slide the bar names it
            st.header("Every layer and head: how peaked, and what each does")
        # On a slide the grids are a little shorter than a map: their slanted head labels take the room of a title.
        shorter = slide_pixels(GRID_LABELS + ROLE_ROWS) if settings.presentation else 0
        grid = dataclasses.replace(style, max_map_pixels=style.max_map_pixels - shorter, side_by_side=True)
        _roles(key, device, model_trace, hide_first, grid, settings.presentation)
    if slides.shows("thumbs"):
        groups = word_groups(list(model_trace.words)) if words and model_trace.words else None
        show_figure(
            remember(model_trace, ("thumbs", style, hide_first, bool(groups)),
                     lambda: thumbnails_figure(model_trace, style, hide_first=hide_first, groups=groups)),
            "rm-thumbs",
        )  # fmt: skip
    if slides.shows("sinks"):
        if not settings.presentation:
            st.header("Attention sinks")
        words_place, grid_place = slide_columns() if settings.presentation else (st.container(), st.container())
        with words_place:
            summary = sink_summary(model_trace)
            st.markdown(summary or "One token: there is no other token to park attention on.")
            st.markdown(SINK_WHY_SHORT if settings.presentation else SINK_WHY)
            if any(model_trace.special):
                st.markdown("**Weight on each special token, by layer** (every head, every row)")
                st.dataframe(special_shares(model_trace), hide_index=True, height=min(300, 36 + 35 * info.n_layers))
        with grid_place:  # the sink mass of every head: the role grid of the first token
            sink = STATISTICS["first"]
            beside = style
            if settings.presentation:  # the slide's right-hand column, as short as the other grids on a slide
                beside = style_for(settings, side_by_side=True, slide=True)
                beside = dataclasses.replace(beside, max_map_pixels=beside.max_map_pixels - slide_pixels(GRID_LABELS))
            figure = statistic_grid_figure(
                model_trace.grid("first").numpy(),
                sink,
                layer_labels(model_trace),
                head_labels(model_trace),
                "rows 2 onward, on this sentence",
                beside,
            )
            show_figure(figure, "rm-sinks")  # fmt: skip
    if slides.shows("rollout"):
        if not settings.presentation:
            st.header("Across layers: attention rollout")
            st.caption(f"Abnar & Zuidema (2020), {link('attention rollout')}: each layer as ½·(its heads' mean "
                       "weights) + ½·I (the residual connection), multiplied through the layers.")  # fmt: skip
        _rollout(model_trace, words, hide_first, style)

    if slides.shows("generate"):
        _generation(key, device, settings.text, info, model_trace, style)

    head_slides = {stage.key for stage in heads_stages} | set(head_reads)
    if not settings.presentation or slides.shown in head_slides:
        if not settings.presentation:
            st.header("One head, stage by stage")
        left, right = row[1:] if settings.presentation else st.columns(2)  # the layer and head a stage shows
        check_choice("rm_layer", "layer", [f"layer {i + 1}" for i in range(info.n_layers)])
        check_choice("rm_head", "head", head_labels(model_trace))
        layer = left.selectbox("layer", range(info.n_layers), format_func=lambda i: f"layer {i + 1}", key="rm_layer",
                               bind="query-params", label_visibility=shown)  # fmt: skip
        labels = head_labels(model_trace)
        head = right.selectbox("head", range(info.n_heads), format_func=lambda i: labels[i], key="rm_head",
                               bind="query-params", label_visibility=shown)  # fmt: skip
        layer, head = min(layer or 0, info.n_layers - 1), min(head or 0, info.n_heads - 1)
        layer_trace = model_trace.layers[layer]
        if not settings.presentation:
            st.markdown(f"{layer_trace.label} · {_head_sharing_note(model_trace, head)}")
        elif slides.shown == "qkv" and len(model_trace.heads_sharing(model_trace.kv_head_of[head])) > 1:
            # a slide: one line, on the slide of K and V, where the sharing shows
            sharing = ", ".join(str(h + 1) for h in model_trace.heads_sharing(model_trace.kv_head_of[head]))
            st.markdown(f"Heads {sharing} share key/value head {model_trace.kv_head_of[head] + 1} "
                        "([grouped-query attention](glossary#gqa)): the same K and V.")  # fmt: skip
        beside = style_for(settings, side_by_side=layer_trace.n_tokens <= SIDE_BY_SIDE_MAX)
        special = model_trace.special[0]
        for stage in stages_for(layer_trace):
            if slides.shows(stage.key):
                if settings.presentation:  # words left, figures right, as on the Walkthrough's slides
                    slide = style_for(settings, side_by_side=True, slide=True)
                    show_stage(layer_trace, stage.key, head, slide, prefix="rm-", query_key="rm_query",
                               places=slide_columns())  # fmt: skip
                else:
                    show_stage(layer_trace, stage.key, head, beside, prefix="rm-", query_key="rm_query")
                note = sink_note(layer_trace, head, special) if stage.key == "weights" else ""
                if note:
                    st.info(note, icon="⚓")
            if stage.key == "weights":  # the weights read more ways: each its own slide, read normally below them
                _read_beside(model_trace, head_reads, layer, head, hide_first, words, slides, settings)
            if not settings.presentation:
                st.divider()
