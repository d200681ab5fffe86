"""The capture: transformers' own eager attention, keeping every stage, and the traces made from it.

transformers routes every attention layer through a function looked up by name in its
AttentionInterface. We register our own (`capture_attention`) under CAPTURE, with the matching mask
builder, and models are loaded with attn_implementation=CAPTURE (sources.load_model). Each forward
call passes its own list as the keyword argument `attention_record`; transformers hands keyword
arguments down to the attention function, which appends one entry per layer. Nothing is attached
to the model, so one cached model can serve many sessions at once.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING

import torch
import transformers
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from attention_core.config import check_text
from attention_core.engine import trace_from_stages
from attention_core.models.latent import keep_inputs, latent_layer, rope_base
from attention_core.reading import value_norms
from attention_core.statistics import STATISTICS, per_layer_and_head
from attention_core.trace import AttentionTrace
from attention_core.variants import expand_kv

if TYPE_CHECKING:
    from attention_core.models.kinds import LoadedModel, ModelInfo

CAPTURE = "attention_explorer"  # the attention implementation name we register with transformers
WORD_START = "·"  # drawn before a token that starts a new word, where the tokenizer marks it (BPE's "Ġ")


# What some models hand their attention function besides q, k, v and the mask, and that changes the weights: the
# capture refuses a model that passes one (a sliding window comes in the mask, and a soft cap is computed).
UNREAD = {"s_aux": "gpt-oss's learned sink logits", "sinks": "learned sink logits", "alibi": "ALiBi's biases",
          "position_bias": "T5's relative position biases"}  # fmt: skip


def capture_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None, **kwargs
):  # fmt: skip
    """Eager attention (as transformers' eager_attention_forward) that also records every stage.

    query [b, h, n, d_k]; key, value [b, h_kv, n, d]; attention_mask additive [b, 1, n, n] or None (a sliding
    window is in it); softcap: Gemma 2's c, which caps the scaled scores to c·tanh(s/c) before the mask.
    kwargs may carry `attention_record` (a list: every stage is appended to it) and `dropping` (models/sparse.py's
    Dropping: a window, sinks or top-k applied on top of the model's own mask).
    Returns (attn_output [b, n, h, d_v], weights [b, h, n, n]) like every AttentionInterface function.
    """
    kept = kwargs.get("keep_qk")
    if kept is not None:  # a long text (models/long.py): q and k kept, the output made by SDPA, no n×n map
        return _kept_and_attended(kept, query, key, value, attention_mask, scaling, softcap, kwargs)
    unread = [name for name in UNREAD if kwargs.get(name) is not None]
    if unread:
        raise ValueError(
            f"this model's attention also takes {', '.join(unread)} ({UNREAD[unread[0]]}), which this app does not "
            "compute: its maps would be wrong, so it is not shown"
        )
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    key_all, value_all = expand_kv(key, groups), expand_kv(value, groups)  # the from-scratch variants' expansion
    scores = query @ key_all.transpose(2, 3)  # [b, h, n, n]
    scaled_scores = scores * scaling
    if softcap:
        scaled_scores = softcap * torch.tanh(scaled_scores / softcap)
    masked = scaled_scores if attention_mask is None else scaled_scores + attention_mask
    dropping = kwargs.get("dropping")  # a mask after MLA (models/sparse.py): the keys it drops go to −∞
    if dropping is not None:
        masked = dropping.apply(masked)
    weights = torch.softmax(masked, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    context = weights @ value_all  # [b, h, n, d_v]
    record = kwargs.get("attention_record")
    if record is not None:
        record.append(
            {
                "q": query[0],
                "k": key_all[0],
                "v": value_all[0],
                "scores": scores[0],
                "scale": float(scaling),
                "scaled_scores": scaled_scores[0],
                "softcap": float(softcap) if softcap else None,
                "additive_mask": None if attention_mask is None else attention_mask[0, 0],
                "weights": weights[0],
                "context": context[0],
                "kv_heads": key.shape[1],
            }
        )
    out = context.transpose(1, 2).contiguous()  # [b, n, h, d_v]: the heads' outputs, before W_O mixes them
    intervention = kwargs.get("intervention")  # a head knocked out or patched (models/intervene.py)
    return (out if intervention is None else intervention.apply(module.layer_idx, out)), weights


def _kept_and_attended(kept: list, query, key, value, attention_mask, scaling, softcap, kwargs):
    """Keep this layer's q [h, n, d] and k [g, n, d], and attend with PyTorch's SDPA, causal (a decoder's) or over
    every key (an encoder's, unpadded). A mask of another shape (a sliding window), a soft cap or a sink logit would
    change the weights models/long.py recomputes: refused by name."""
    unread = [UNREAD[name] for name in UNREAD if kwargs.get(name) is not None]
    unread += ["a soft cap on its scores (Gemma 2's)"] if softcap else []
    n = query.shape[2]
    allowed = None if attention_mask is None else attention_mask[0, 0] == 0
    causal = allowed is not None and not bool(allowed.all())
    if unread or (causal and not torch.equal(allowed, torch.ones_like(allowed).tril())):
        what = f"takes {unread[0]}" if unread else "has a mask other than the causal one (a sliding window)"
        raise ValueError(
            "long texts are read for models whose attention is plain causal or full attention (SmolLM2's, MiniLM's); "
            f"this model's attention {what}, which changes the weights in a way this reading does not recompute"
        )
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    kept.append({"q": query[0], "k": key[0], "scale": float(scaling), "causal": causal})
    if progress := kwargs.get("long_progress"):
        progress(len(kept))
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=causal and n > 1, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )  # [b, h, n, d_v]
    return out.transpose(1, 2).contiguous(), None


transformers.utils.logging.disable_progress_bar()  # no per-tensor progress bars in the server log
transformers.AttentionInterface.register(CAPTURE, capture_attention)
# Without this, transformers builds no mask for an unknown implementation name and a causal
# model silently stops being causal. eager_mask gives the additive float mask eager attention expects.
AttentionMaskInterface.register(CAPTURE, eager_mask)


@dataclasses.dataclass(frozen=True)
class ModelTrace:
    """Every layer's attention for one text: one AttentionTrace per layer."""

    info: ModelInfo
    tokens: tuple[str, ...]  # readable (see readable_token)
    raw_tokens: tuple[str, ...]  # as the tokenizer spells them
    layers: tuple[AttentionTrace, ...]
    total_tokens: int  # before truncation to info.token_cap
    special: tuple[bool, ...] = ()  # whether each token is one of the tokenizer's special tokens ([CLS], <s>)
    words: tuple[int | None, ...] = ()  # each token's word, as the tokenizer splits words (None: special); () unknown
    value_norms: tuple[torch.Tensor, ...] = ()  # per layer [h, n]: ‖v_j·W_O^h‖ (reading.value_norms); () unknown

    @property
    def truncated(self) -> bool:
        return self.total_tokens > len(self.tokens)

    def grid(self, key: str, leave_first_out: bool = False) -> torch.Tensor:
        """[layers, heads] float64: a statistic of the registry (attention_core/statistics.py) for every head,
        e.g. "normalized_entropy" (low = peaked) or "first" (the attention sink's share)."""
        sequence = self.layers[0].sequence
        layers = [layer.weights for layer in self.layers]
        return per_layer_and_head(STATISTICS[key], layers, sequence, leave_first_out)

    @property
    def kv_head_of(self) -> tuple[int, ...]:
        """Query head -> the key/value head it reads (every layer of a model groups its heads alike)."""
        return self.layers[0].kv_head_of

    def heads_sharing(self, kv_head: int) -> list[int]:
        """The query heads that read key/value head `kv_head`."""
        return self.layers[0].heads_sharing(kv_head)

    def to(self, device: torch.device | str) -> ModelTrace:
        return dataclasses.replace(
            self,
            layers=tuple(layer.to(device) for layer in self.layers),
            value_norms=tuple(norms.to(device) for norms in self.value_norms),
        )


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE spells each byte as one printable character ("Ġ" is the space byte):
    the inverse of that table, character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(others)}


BYTE_OF = _byte_level_alphabet()


def readable_token(tokenizer, raw: str) -> str:
    """The token as a reader would write it, keeping where words start as the tokenizer has it:
    BPE's "Ġday" (a space, then "day") -> "·day", "Ċ" -> "↵"; WordPiece's continuation marker is kept
    ("##ing" continues the word before); special tokens as they are. A piece of a multi-byte
    character (an emoji cut in two) shows its bytes: "⟨f0 9f⟩"."""
    if raw in tokenizer.all_special_tokens or raw.startswith("##"):
        return raw
    text = tokenizer.convert_tokens_to_string([raw])
    if "\ufffd" in text and all(char in BYTE_OF for char in raw):
        start = WORD_START if raw.startswith("Ġ") else ""
        return start + "⟨" + " ".join(f"{BYTE_OF[char]:02x}" for char in raw.removeprefix("Ġ")) + "⟩"
    if text.startswith(" ") and text.strip():
        text = WORD_START + text[1:]  # the leading space marks the start of a word
    visible = text.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", "⇥")
    return visible if visible.strip() else (visible.replace(" ", "␣") or raw)


def _layer_trace(
    entry: dict, tokens: tuple[str, ...], label: str, device: str, kv_head_of: tuple[int, ...]
) -> AttentionTrace:
    """An AttentionTrace from one recorded layer (one sequence); its variant follows from kv_head_of."""
    additive = entry["additive_mask"]
    mask = None
    if additive is not None:
        mask = additive == 0  # eager masks are 0 where allowed, the dtype's minimum where hidden
        if bool(mask.all()):
            mask = None  # no padding and no causal mask: nothing is hidden
    scaled_scores = entry["scaled_scores"]
    stages = {
        "scores": entry["scores"],
        "scaled_scores": scaled_scores,
        "masked_scores": scaled_scores if mask is None else scaled_scores.masked_fill(~mask, float("-inf")),
        "weights": entry["weights"],
        "context": entry["context"],
    }
    q, k, v = entry["q"], entry["k"], entry["v"]
    return trace_from_stages(
        tokens,
        q,
        k,
        v,
        stages,
        scale=entry["scale"],
        mask=mask,
        device=device,
        label=label,
        kv_head_of=kv_head_of,
        softcap=entry["softcap"],
    )


def capture(
    model: torch.nn.Module, input_ids: torch.Tensor, tokens: tuple[str, ...], title: str = "layer"
) -> tuple[list[AttentionTrace], tuple[int, ...]]:
    """Run the model once on input_ids [1, n] and return (one AttentionTrace per layer, kv_head_of).

    The model must have been loaded with attn_implementation=CAPTURE. Safe to call from many
    threads on one model: the record is a local list, not state on the model.
    """
    if model.config._attn_implementation != CAPTURE:
        raise ValueError(
            f"the model uses attention implementation {model.config._attn_implementation!r}; "
            f"load it with attn_implementation={CAPTURE!r} so that its attention can be captured"
        )
    if input_ids.dim() != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must have shape [1, n] with n >= 1; got {list(input_ids.shape)}")
    record: list[dict] = []
    device = next(model.parameters()).device
    keep_inputs(model)  # MLA layers: their input X too (attention_core/models/latent.py)
    with torch.inference_mode():
        model(input_ids=input_ids.to(device), attention_record=record, use_cache=False)
    inputs = [entry for entry in record if "x" in entry]
    record = attention_entries(record)
    n_layers = model.config.num_hidden_layers
    if len(record) != n_layers:
        raise ValueError(
            f"captured {len(record)} attention layers but the {model.config.model_type} model has {n_layers}: this "
            "family does not route its attention through transformers' AttentionInterface, so this app cannot read "
            "it and shows no maps rather than wrong ones"
        )
    heads = record[0]["q"].shape[0]
    groups = heads // record[0]["kv_heads"]
    kv_head_of = tuple(head // groups for head in range(heads))
    layers = [
        _layer_trace(entry, tokens, f"{title} · layer {index + 1}", str(device), kv_head_of)
        for index, entry in enumerate(record)
    ]
    if len(inputs) == n_layers:  # every layer is MLA: shown through this app's MLA, where it computes the same
        base = rope_base(model.config)
        layers = [latent_layer(i["module"], i["x"], layer, base) for i, layer in zip(inputs, layers, strict=True)]
    return layers, kv_head_of


def attention_entries(record: list[dict]) -> list[dict]:
    """The record's entries that capture_attention made, one per layer (not the inputs MLA layers recorded)."""
    return [entry for entry in record if "weights" in entry]


# The output projection W_O of each attention layer, by the module names of the architectures we read (Llama's
# self_attn.o_proj, BERT's attention.output.dense): nn.Linear, weight [d_model, h·d_v].
OUTPUT_PROJECTIONS = ("self_attn.o_proj", "attention.output.dense")


def output_projections(model: torch.nn.Module) -> list[torch.Tensor]:
    """Each layer's W_O as [h·d_v, d_model] (its Linear's weight, transposed), in layer order; [] where the
    architecture names it otherwise (then the page has no norm-based view)."""
    found = [module.weight.T for name, module in model.named_modules() if name.endswith(OUTPUT_PROJECTIONS)]
    return found if len(found) == model.config.num_hidden_layers else []


# A fast tokenizer sets its truncation on the shared Rust object, and two threads doing that at once can fail
# ("Already borrowed", huggingface/tokenizers#537). Not seen here (200 texts on 8 threads), but the model worker
# runs readers side by side: one text is tokenized at a time (it takes a millisecond).
TOKENIZING = threading.Lock()


def trace_text(loaded: LoadedModel, text: str) -> ModelTrace:
    """Tokenize text as the model does (special tokens included), cut it to the token cap, capture every layer."""
    check_text(text)
    info, tokenizer = loaded.info, loaded.tokenizer
    with TOKENIZING:
        encoding = tokenizer(text, verbose=False)  # counted, then cut below: no warning that it is long
        all_ids = encoding["input_ids"]
        if not all_ids:
            raise ValueError(f"text gives no tokens for {info.title}; type a sentence")
        cap = info.token_cap
        if len(all_ids) > cap:
            encoding = tokenizer(text, truncation=True, max_length=cap)
        words = tuple(encoding.word_ids()) if hasattr(encoding, "word_ids") else ()
    return _trace_ids(loaded, encoding["input_ids"], len(all_ids), words)


PROBE_HALF = 20  # tokens in the induction probe's random sequence, which is then repeated (TransformerLens: 50)
PROBE_SEED = 0


def probe_ids(tokenizer, half: int = PROBE_HALF, seed: int = PROBE_SEED) -> list[int]:
    """The induction probe: `half` random whole-word tokens (letters only, so that it reads as words), then the
    same again, with the special tokens the model's tokenizer adds around a text ([CLS] … [SEP] for BERT; none
    for SmolLM2). A head that attends from a token of the second copy to the token after its first occurrence
    is doing induction: it could not know what comes next from the meaning, only from the repeat."""
    special = set(tokenizer.all_special_ids)
    vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    # A word's first piece: byte-level BPE marks it with its space ("Ġday"), SentencePiece with "▁"; WordPiece
    # marks the pieces that follow instead ("##ing"), which are not letters only.
    marker = next((m for m in ("Ġ", "▁") if any(raw.startswith(m) for raw in vocabulary)), "")
    words = [
        index
        for index, raw in enumerate(vocabulary)
        if index not in special
        and raw.startswith(marker)
        and raw[len(marker) :].isascii()
        and raw[len(marker) :].isalpha()
    ]
    chosen = torch.randperm(len(words), generator=torch.Generator().manual_seed(seed))[:half].tolist()
    sequence = [words[i] for i in chosen]
    # the special tokens the tokenizer puts around a text, read off a one-word text (none where it is not found)
    around, inside = tokenizer("word")["input_ids"], tokenizer("word", add_special_tokens=False)["input_ids"]
    start = next((i for i in range(len(around)) if around[i : i + len(inside)] == inside), None)
    if start is None:
        return sequence + sequence
    return around[:start] + sequence + sequence + around[start + len(inside) :]


def trace_probe(loaded: LoadedModel) -> ModelTrace:
    """Every layer's attention on the induction probe (probe_ids)."""
    with TOKENIZING:
        ids = probe_ids(loaded.tokenizer)
    return _trace_ids(loaded, ids, len(ids), ())


def _trace_ids(loaded: LoadedModel, ids: list[int], total: int, words: tuple) -> ModelTrace:
    info, tokenizer = loaded.info, loaded.tokenizer
    with TOKENIZING:
        raw = tuple(tokenizer.convert_ids_to_tokens(ids))
        readable = tuple(readable_token(tokenizer, token) for token in raw)
        special = tuple(token in tokenizer.all_special_tokens for token in raw)
    layers, _ = capture(loaded.model, torch.tensor([ids]), readable, info.title)
    with torch.inference_mode():
        norms = tuple(
            value_norms(layer.v, w_o).float()
            for layer, w_o in zip(layers, output_projections(loaded.model), strict=False)
        )
    return ModelTrace(
        info, readable, raw, tuple(layers), total_tokens=total, special=special, words=words, value_norms=norms
    )
