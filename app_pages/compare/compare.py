"""Compare: the same sentence under two settings, side by side, saying what is held fixed."""

import streamlit as st

from app_pages.compare.spec import SPEC
from attention_core import MAX_DIM
from attention_core.composed import parse_mask
from attention_core.engine import composed_mask
from attention_core.statistics import PEAKINESS
from attention_core.variants import MHA, MLA, VARIANTS, fit_kv_heads
from figures.stages import BY_KEY, grid_stages, stage_view
from ui.links import check_choice, check_whole
from ui.live_chart import show_figure
from ui.own_weights import own_weights_box
from ui.show import friendly_errors, style_for
from ui.sidebar import current_settings
from ui.slides import Slides
from ui.traces import trace_for


def _two_d_ks(config):
    """Both d_k chosen by the reader (bound to the URL); by default the sidebar's and eight times it."""
    left, right = st.columns(2)
    check_whole("cmp_dk_left", "d_k, left", 1, MAX_DIM)
    check_whole("cmp_dk_right", "d_k, right", 1, MAX_DIM)
    small = left.number_input("d_k, left", 1, MAX_DIM, value=config.d_k, key="cmp_dk_left", bind="query-params")
    large = right.number_input(
        "d_k, right", 1, MAX_DIM, value=min(MAX_DIM, config.d_k * 8), key="cmp_dk_right", bind="query-params"
    )
    held = (
        f"Held fixed: the sentence, X, W_V and W_O (same seed). W_Q and W_K of the smaller d_k are the first "
        f"{min(small, large)} columns of the larger one's, so the d_k = {max(small, large)} dot products add "
        f"{abs(large - small)} more terms to the same {min(small, large)}."
    )
    if config.init == "xavier":
        held += " With xavier init each side's bound √(6 / (d_model + d_k)) scales its columns by a different amount."
    return {"d_k": small}, {"d_k": large}, held


COMPARISONS = ("causal vs not", "scaled vs not", "two seeds", "two d_k", "two variants")


def _variant_changes(key: str, config) -> dict:
    """A variant with sizes it can take: key/value heads (where it has its own) are the sidebar's where they
    divide the heads and are fewer (fit_kv_heads)."""
    changes = {"variant": key}
    if "kv_heads" in VARIANTS[key].uses:
        changes["kv_heads"] = fit_kv_heads(config.heads, config.kv_heads)
    return changes


def _two_variants(config, present: bool):
    """The sidebar's variant and another (bound to the URL): by default the first of the registry that is not the
    sidebar's and differs most from it (MLA, or MHA when the sidebar has MLA). On a slide their labels are read
    aloud, not drawn: the sides' own titles name the variants."""
    choices = tuple(VARIANTS)
    shown = "collapsed" if present else "visible"
    left, right = st.columns(2)
    check_choice("cmp_variant_left", "variant, left", choices)
    check_choice("cmp_variant_right", "variant, right", choices)
    first = left.selectbox(
        "variant, left",
        choices,
        index=choices.index(config.variant),
        key="cmp_variant_left",
        bind="query-params",
        label_visibility=shown,
    )
    other = MLA.key if config.variant != MLA.key else MHA.key
    second = right.selectbox(
        "variant, right",
        choices,
        index=choices.index(other),
        key="cmp_variant_right",
        bind="query-params",
        label_visibility=shown,
    )
    held = "Held fixed: the sentence, X and the sizes (same seed)."
    if not present:  # (a slide keeps to its first sentence: three lines more made it scroll)
        held += (
            " GQA's and MQA's key/value heads are MHA's first ones, so head 1 reads the same K and V under all "
            "three; MLA makes its keys and values from a latent with weights of its own, so its maps differ by more "
            "than the idea. The cache is what each keeps per token."
        )
    return _variant_changes(first, config), _variant_changes(second, config), held


def _pair(name, config, present: bool = False):
    """The two sides' config changes and what is held fixed between them."""
    if name == "causal vs not":  # no mask at all against the sidebar's mask, with the causal mask
        return {"causal": False, "mask": ""}, {"causal": True}, "Held fixed: everything but the mask (same X, same W)."
    if name == "scaled vs not":
        return {"scaled": True}, {"scaled": False}, "Held fixed: everything but the ÷√d_k (same X, same W)."
    if name == "two seeds":
        other = (config.seed + 1) % 2**32
        return {}, {"seed": other}, f"Only the seed differs ({config.seed} and {other}): X and every W are drawn anew."
    if name == "two variants":
        return _two_variants(config, present)
    return _two_d_ks(config)


def _mask_words(config) -> str:
    """The side's mask in a word or a few: a composition read back, else causal or none."""
    if config.mask:
        return f"mask: {parse_mask(composed_mask(config)).words()}"
    return "causal" if config.causal else "no mask"


def _label(changes, config):
    merged = config.replace(**changes)
    return (
        f"{VARIANTS[merged.variant].label}, {_mask_words(merged)}, "
        f"{'scaled' if merged.scaled else 'not scaled'}, seed {merged.seed}, d_k {merged.d_k}"
    )


def main() -> None:
    with friendly_errors():
        settings = current_settings()
        style = style_for(settings, columns=2)
        spec = SPEC
        slides = Slides(spec.title, spec.slide_key, dict(spec.slides), settings.present)
        slides.steer()
        if slides.shows("compare"):
            if not settings.present:
                st.title("Compare two settings")
                own_weights_box(settings)
            what_place = stage_place = slides.middle or st  # on a slide, the choices in the bar
            check_choice("cmp_what", "compare", COMPARISONS)
            offered = grid_stages(trace_for(settings))  # the bent scores too, where the settings bend them
            check_choice("cmp_stage", "stage", [s.title for s in offered])
            what = (
                what_place.segmented_control(
                    "compare",
                    COMPARISONS,
                    default="causal vs not",
                    label_visibility="collapsed" if settings.present else "visible",
                    key="cmp_what",
                    bind="query-params",
                )
                or "causal vs not"
            )
            stage = stage_place.segmented_control(
                "stage",
                [s.key for s in offered],
                format_func=lambda k: BY_KEY[k].title,
                label_visibility="collapsed" if settings.present else "visible",
                default="weights",
                key="cmp_stage",
                bind="query-params",
            )
            left_changes, right_changes, held = _pair(what, settings.config, settings.present)
            if settings.own and what == "two seeds":
                held = "Only the seed differs: your own weights do not depend on it, only what is drawn does."
            st.caption(held)
            for column, changes, side in zip(
                st.columns(2), (left_changes, right_changes), ("left", "right"), strict=True
            ):
                with column:
                    trace = trace_for(settings, **changes)
                    kept = VARIANTS[trace.variant].cache_per_token(trace.sizes)
                    if what == "two variants" and settings.present:  # a slide: what differs, and what it caches
                        st.markdown(f"**{VARIANTS[trace.variant].label}** · KV cache: **{kept:,} numbers** a token")
                    else:
                        st.markdown(f"**{_label(changes, settings.config)}**")
                    if settings.own and not trace.given:
                        st.caption("Your own weights do not fit this side's settings: its weights are drawn.")
                    view = stage_view(trace, stage or "weights", 0, style)
                    show_figure(view.figures[0], f"cmp-{side}")
                    summary = trace.head_summary()[0]
                    shown = [stat for stat in PEAKINESS if stat.top == 1.0]  # the two on a 0..1 scale
                    places = st.columns(len(shown)) if settings.present else [st] * len(shown)  # a slide: a row
                    for place, stat in zip(places, shown, strict=True):
                        place.metric(f"mean {stat.name} (head 1)", f"{summary[f'mean_{stat.key}']:.{stat.digits}f}")
                    st.caption(f"Means over {trace.averaged_rows_text}.")
                    if what == "two variants" and not settings.present:
                        st.metric("KV cache per token and layer", f"{kept:,} numbers")


main()
