"""Your own weights on the Walkthrough, Multi-head, Decoding and Compare: a checkpoint is uploaded once, kept on this
server by its digest, and named in the address (`own_weights=<digest>/<layer>`), so that a link restores the view
wherever the server still holds the file, and says so where it does not.

The file's layer sets the sidebar's sizes (d_model, heads, d_k, ... and the variant its matrices make); a size
changed by hand that the weights do not fit is named, and the drawn weights are shown instead, as with typed
numbers."""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
import threading

import streamlit as st
import torch

from attention_core import tokenize
from attention_core.checkpoints import (
    MAX_CHECKPOINT_MB,
    Checkpoint,
    Layer,
    find_layers,
    head_counts,
    layer_input,
    read_checkpoint,
    split,
)
from attention_core.matrices import TYPED_NAMES
from attention_core.variants import VARIANTS
from attention_core.weights import check_given_weights
from figures.style import markdown_literal
from ui.controls import Settings, log
from ui.links import OWN_WEIGHTS

KEPT_FILES = 8  # checkpoints this server keeps (the oldest goes first): at most 8 × 64 MB of tensors
PREFERRED_D_K = 64  # where a file does not say its heads: the count whose heads are this wide (GPT-2's, Llama's)


@st.cache_resource
def _kept() -> tuple[collections.OrderedDict, threading.Lock]:
    """The checkpoints of every session on this server, by digest: a link opened by a classmate finds them."""
    return collections.OrderedDict(), threading.Lock()


def keep(checkpoint: Checkpoint) -> tuple[Layer, ...]:
    """Keep the file with its layers, found once (ValueError, and nothing kept, where it holds none): every rerun
    of every page that shows them looks them up here instead of reading the file's names again."""
    layers = tuple(find_layers(checkpoint))
    files, lock = _kept()
    with lock:
        files[checkpoint.digest] = (checkpoint, layers)
        files.move_to_end(checkpoint.digest)
        while len(files) > KEPT_FILES:
            files.popitem(last=False)
    return layers


def held(digest: str) -> tuple[Checkpoint, tuple[Layer, ...]] | None:
    files, lock = _kept()
    with lock:
        return files.get(digest)


@dataclasses.dataclass(frozen=True)
class Opened:
    """The file and layer a value of own_weights names, as this server holds them."""

    checkpoint: Checkpoint
    layer: Layer
    layers: tuple[Layer, ...]

    @property
    def typed_as(self) -> str:
        return f"yours ({self.checkpoint.name}, {self.layer.label})"


def opened(value: str) -> Opened:
    """The file and layer that `value` names; ValueError saying why they cannot be shown."""
    digest, _, prefix = value.partition("/")
    found = held(digest)
    if found is None:
        raise ValueError(
            f"The link's own weights (file {digest}) are not on this server (it restarted, or the link comes from "
            "another): open the file again under “Your own weights”. Drawn weights are shown meanwhile."
        )
    checkpoint, layers = found
    for layer in layers:
        if layer.prefix == prefix:
            return Opened(checkpoint, layer, layers)
    raise ValueError(f"{checkpoint.name} has no layer {prefix!r}; its layers: {', '.join(x.label for x in layers)}")


@functools.lru_cache(maxsize=64)
def _head_counts(value: str) -> tuple[int, ...]:
    """head_counts of the layer `value` names: each count cuts every matrix once, so they are found once per file."""
    return tuple(head_counts(opened(value).layer))


def counts_for(checkpoint: Checkpoint, layer: Layer) -> tuple[int, ...]:
    return _head_counts(f"{checkpoint.digest}/{layer.prefix}")


def own_value() -> str:
    """This session's own_weights value (the address's first), kept in the address on every page."""
    raw = st.session_state.get(OWN_WEIGHTS.key) or st.query_params.get(OWN_WEIGHTS.key, "")
    if not re.fullmatch(OWN_WEIGHTS.pattern, raw):
        return ""
    st.session_state[OWN_WEIGHTS.key] = raw
    if st.query_params.get(OWN_WEIGHTS.key) != raw:
        st.query_params[OWN_WEIGHTS.key] = raw
    return raw


def own_given(value: str, config, text: str) -> dict[str, torch.Tensor]:
    """The layer that `value` names, cut as `config` has its heads, and X where the file gives it; ValueError
    naming what does not fit."""
    shown = opened(value)
    sizes, weights = split(shown.layer, config.heads)
    held_sizes = config.sizes
    widths = ("d_model", "d_k", "d_v", "kv_heads", "d_c", "d_cq", "d_rope")
    differs = [f"{name} {sizes.get(name, 0)}" for name in widths if sizes.get(name, 0) != getattr(held_sizes, name)]
    if sizes["variant"] != config.variant:  # then its widths are another variant's: the variant says it
        differs = [f"the variant {VARIANTS[sizes['variant']].label}"]
    if differs:
        raise ValueError(
            f"Your weights ({shown.checkpoint.name}, {shown.layer.label}) need {', '.join(differs)} with "
            f"{config.heads} heads; the settings differ, so drawn weights are shown. “Set the sizes back” under "
            "“Your own weights” shows them again."
        )
    given = check_given_weights(weights, config)
    x, _ = layer_input(shown.checkpoint, shown.layer, tokenize(text))
    if x is not None:
        given["x"] = x.to(config.torch_dtype)
    return given


def own_refusal(value: str, config, text: str) -> str:
    """Why the own weights `value` names are not used with this config and sentence ("" when they are)."""
    if not value:
        return ""
    try:
        opened(value)  # not kept: the file may be opened again at any time
    except ValueError as error:
        return str(error)
    return _fit_refusal(value, config, text)


@functools.lru_cache(maxsize=64)
def _fit_refusal(value: str, config, text: str) -> str:
    """Whether a file this server holds fits (its digest names its bytes, so the answer stays true)."""
    try:
        own_given(value, config, text)
    except ValueError as error:
        return str(error)
    return ""


def own_label(value: str) -> str:
    """How a page names the weights `value` names: "yours (file, layer)"; "typed" where the server lacks them."""
    try:
        return opened(value).typed_as
    except ValueError:
        return "typed"


def _sizes_state(layer: Layer, heads: int) -> dict:
    state, _ = split(layer, heads)  # the sidebar's keys: variant, d_model, heads, d_k, ...
    state.setdefault("positional", layer.layout.positional)
    return state | ({"causal": layer.layout.causal} if layer.layout.causal is not None else {})


def _first_heads(checkpoint: Checkpoint, layer: Layer) -> int:
    counts = counts_for(checkpoint, layer)
    if not counts:
        raise ValueError(f"{layer.label}: no count of heads up to 16 cuts its matrices evenly")
    said = checkpoint.facts.get("heads")
    if said in counts:
        return said
    return min(counts, key=lambda h: abs(split(layer, h)[0]["d_k"] - PREFERRED_D_K))


def _use(checkpoint: Checkpoint, layer: Layer, heads: int) -> None:
    """Show this layer as `heads` heads: the sidebar's sizes from its matrices, typed numbers forgotten."""
    st.session_state.update({**_sizes_state(layer, heads), **dict.fromkeys(TYPED_NAMES, "")})
    st.session_state[OWN_WEIGHTS.key] = f"{checkpoint.digest}/{layer.prefix}"
    st.query_params[OWN_WEIGHTS.key] = st.session_state[OWN_WEIGHTS.key]
    st.session_state["own_refusal"] = ""


def _load(key: str) -> None:
    """on_change of the uploader: read the file and show its first layer, or keep the refusal to show it."""
    upload = st.session_state.get(key)
    st.session_state["own_refusal"] = ""
    if upload is None:
        return
    try:
        checkpoint = read_checkpoint(upload.name, upload.getvalue())
        layer = keep(checkpoint)[0]
        heads = _first_heads(checkpoint, layer)
    except ValueError as error:
        log.info("refused a checkpoint: %s", error)
        st.session_state["own_refusal"] = str(error)
        return
    _use(checkpoint, layer, heads)


def _forget() -> None:
    st.session_state.pop(OWN_WEIGHTS.key, None)
    if OWN_WEIGHTS.key in st.query_params:
        del st.query_params[OWN_WEIGHTS.key]


def _choose(shown: Opened) -> None:
    """on_change of the layer or heads menu."""
    layer = next(x for x in shown.layers if x.label == st.session_state["own_layer"])
    heads = st.session_state["own_heads"]
    if heads not in counts_for(shown.checkpoint, layer):
        heads = _first_heads(shown.checkpoint, layer)
    _use(shown.checkpoint, layer, heads)


def own_weights_box(settings: Settings) -> None:
    """The box to open a checkpoint in, and, once one is open, its layer, its heads and how its names were placed."""
    with st.expander(
        "Your own weights: a layer from your checkpoint", expanded=bool(settings.own), icon=":material/upload_file:"
    ):
        st.file_uploader(
            "A state_dict as .safetensors, or .pt/.pth (read with weights_only=True): nanoGPT, LLMs from scratch, "
            "nn.MultiheadAttention, transformers or DeepSeek's MLA",
            type=["safetensors", "pt", "pth"],
            key="own_file",
            on_change=_load,
            args=("own_file",),
            max_upload_size=MAX_CHECKPOINT_MB,
            help=f"At most {MAX_CHECKPOINT_MB} MB. A pickle is never loaded.",
        )
        if st.session_state.get("own_refusal"):
            st.warning(markdown_literal(st.session_state["own_refusal"]), icon="📂")
        if not settings.own:
            return
        try:
            shown = opened(settings.own)
        except ValueError:
            return  # the page's refusals say why
        _mapping(shown, settings)
        left, right = st.columns(2)
        if own_refusal(settings.own, settings.config, settings.text):
            heads = settings.config.heads
            if heads not in counts_for(shown.checkpoint, shown.layer):
                heads = _first_heads(shown.checkpoint, shown.layer)
            left.button("Set the sizes back", on_click=_use, args=(shown.checkpoint, shown.layer, heads),
                        key="own_sizes_back")  # fmt: skip
        right.button("Forget your weights", on_click=_forget, key="own_forget")


def _mapping(shown: Opened, settings: Settings) -> None:
    layer, checkpoint = shown.layer, shown.checkpoint
    left, right = st.columns(2)
    st.session_state["own_layer"] = layer.label
    left.selectbox("layer", [x.label for x in shown.layers], key="own_layer", on_change=_choose, args=(shown,))
    counts = counts_for(checkpoint, layer)
    st.session_state["own_heads"] = settings.config.heads if settings.config.heads in counts else counts[0]
    said = "the file says" if "heads" in checkpoint.facts else "the file does not say: choose your model's"
    right.selectbox(f"heads ({said})", counts, key="own_heads", on_change=_choose, args=(shown,))
    st.markdown(f"**{layer.layout.label}**: how the file's tensors became this page's matrices")
    st.dataframe(
        [
            {"in the file": r.file, "shape": "×".join(map(str, r.shape)), "here": r.ours, "how": r.how}
            for r in layer.placed.rows
        ],  # fmt: skip
        hide_index=True,
    )
    notes = []
    for name in layer.biases:
        largest = checkpoint.tensors[name].abs().max().item()
        effect = (
            "all zero, so nothing is lost"
            if largest == 0
            else f"largest |b| {largest:.3g}: your model's maps differ from these by it"
        )
        notes.append(f"{name} is not used: this app's layers have no biases ({effect}).")
    if layer.unplaced:
        notes.append(f"Not placed: {', '.join(layer.unplaced)} (a mask buffer or another module's).")
    if layer.placed.rope_pairs_neighbours:
        notes.append(
            "RoPE: DeepSeek pairs neighbouring dimensions; the rotary columns are reordered into the halves this "
            "app turns (the same scores)."
        )
    if settings.config.positional == "rotary":
        notes.append(
            f"RoPE turns q and k with this app's base, {settings.config.rope_base:,.0f}: a model trained with "
            "another (Llama 3's 500,000) turns them otherwise, and its maps differ from these."
        )
    x, how = layer_input(checkpoint, layer, tokenize(settings.text))
    notes.append(f"X = {how}." if x is not None else f"X is the app's own (seeded) embedding: {how}.")
    for note in notes:
        st.caption(markdown_literal(note))
