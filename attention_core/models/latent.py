"""MLA inside a real model (DeepSeek-V2 and V3 as transformers runs them): each layer recomputed by this app's own MLA
from the model's weights and the layer's input, so that the Real model page shows MLA's own stages (the latent
c_KV, the rotary key k^R, the absorbed scores, what a cache keeps) for the model's own numbers.

transformers hands its attention function q, k and v, not X, so the capture cannot see the latent. A pre-hook on
each MLA module puts the module's input into the call's record; the layer's weights are read as a checkpoint's
(attention_core/checkpoints: transformers' MLA names, RoPE's neighbouring pairs reordered into halves). The
recomputed layer is used only where its attention weights are the captured ones: a model this app's MLA does not
compute alike (YaRN's rescaled positions, sizes beyond the engine's) keeps the captured layer, drawn as
transformers computed it."""

from __future__ import annotations

import dataclasses

import torch

from attention_core.checkpoints import Checkpoint, find_layers, split
from attention_core.config import AttentionConfig
from attention_core.engine import compute_attention
from attention_core.trace import AttentionTrace

AGREES = 1e-3  # a weight off by more than this is another computation (float32's rounding is ~1e-6 here)


def is_latent(module: torch.nn.Module) -> bool:
    return hasattr(module, "kv_a_proj_with_mqa") and hasattr(module, "kv_b_proj")


def keep_inputs(model: torch.nn.Module) -> None:
    """Give every MLA module of the model a pre-hook that records its input X, where a capture asks for it."""
    for module in model.modules():
        if is_latent(module) and not getattr(module, "keeps_its_input", False):
            module.register_forward_pre_hook(_record_input, with_kwargs=True)
            module.keeps_its_input = True


def _record_input(module, args, kwargs):
    record = kwargs.get("attention_record")
    if record is not None:
        hidden = args[0] if args else kwargs["hidden_states"]
        record.append({"x": hidden[0], "module": module})


def rope_base(config) -> float | None:
    """The model's RoPE base (rope_theta), or None where its positions are rescaled (then nothing is recomputed)."""
    parameters = getattr(config, "rope_parameters", None) or {}
    if parameters.get("rope_type", "default") != "default":
        return None
    return float(parameters.get("rope_theta") or getattr(config, "rope_theta", None) or 10_000.0)


def latent_layer(module: torch.nn.Module, x: torch.Tensor, captured: AttentionTrace, base: float | None):
    """This app's MLA trace of one layer, or the captured trace where it would not be the same numbers."""
    if base is None:
        return captured
    weights = {name: tensor.detach().float().cpu() for name, tensor in module.state_dict().items()}
    try:
        layer = find_layers(Checkpoint("layer", "", weights, {}))[0]
        sizes, given = split(layer, captured.heads)
        widths = {name: sizes[name] for name in ("d_model", "d_k", "d_v", "d_c", "d_cq", "d_rope", "positional")}
        config = AttentionConfig(heads=sizes["heads"], variant=sizes["variant"], causal=captured.mask is not None,
                                 rope_base=base, **widths)  # fmt: skip
        ours = compute_attention(x.detach().float().cpu(), config, weights=given, tokens=list(captured.tokens))
    except ValueError:
        return captured
    if captured.mask is not None and not torch.equal(ours.mask.cpu(), captured.mask.cpu()):
        return captured  # padding, or a window: not a plain causal mask
    if float((ours.weights - captured.weights.float().cpu()).abs().max()) > AGREES:
        return captured
    return dataclasses.replace(ours, label=captured.label, typed_as="the model's own").to(captured.device)
