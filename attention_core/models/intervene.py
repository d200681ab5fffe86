"""Does this head matter? A head knocked out (its output set to zero, or to its mean over the text) and what the
model then predicts; for an encoder, how far its sentence embedding moves. Patching is patching.py.

Where a head looks is not what it does: a head can put most of its weight on one token and change nothing. To ask
what it does, change its output and measure the prediction. The change is made where the heads' outputs leave
attention, before W_O mixes them: the capture's attention function (capture.py) hands each layer's output
[batch, n, heads, d_v] to the `Intervention` passed down with the forward call, as it hands down its record. The
residual stream is reached the same way: each layer's input goes to the call's Intervention first (a pre-hook on
every layer that does nothing for a call without one, attached once, as latent.py's). Nothing per call is attached
to the model, so one cached model serves every session.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import torch

from attention_core.models.capture import TOKENIZING, readable_token

TOP = 5  # the next token's choices shown before and after
HEAD_PATTERN = re.compile(r"L(\d+)\.(?:H(\d+)|\*)")  # "L3.H5" one head, "L7.*" every head of layer 7 (from 1)


@dataclasses.dataclass(frozen=True, order=True)
class Head:
    """A head of a layer, both counted from 0 (said from 1, as the page shows them)."""

    layer: int
    head: int

    def __str__(self) -> str:
        return f"L{self.layer + 1}.H{self.head + 1}"


def parse_heads(text: str, layers: int, heads: int) -> tuple[Head, ...]:
    """`L3.H5, L7.*` as Heads, in order, each once; a piece that is not one, or a layer or head the model lacks, is
    refused by name."""
    found: set[Head] = set()
    for piece in filter(None, (part.strip() for part in text.split(","))):
        match = HEAD_PATTERN.fullmatch(piece.upper())
        if match is None:
            raise ValueError(f"heads: {piece!r} is not a head; write L3.H5 (layer 3, head 5) or L7.* (all of layer 7)")
        layer = int(match[1])
        if not 1 <= layer <= layers:
            raise ValueError(f"heads: {piece!r} names layer {layer}; this model has layers 1 to {layers}")
        if match[2] is None:
            found.update(Head(layer - 1, h) for h in range(heads))
        elif 1 <= int(match[2]) <= heads:
            found.add(Head(layer - 1, int(match[2]) - 1))
        else:
            raise ValueError(f"heads: {piece!r} names head {match[2]}; each layer has heads 1 to {heads}")
    return tuple(sorted(found))


def written(heads: tuple[Head, ...], layers: int, heads_per_layer: int) -> str:
    """Heads as parse_heads reads them, shortest: a whole layer as L7.*."""
    pieces = []
    for layer in sorted({head.layer for head in heads}):
        chosen = [head for head in heads if head.layer == layer]
        pieces += [f"L{layer + 1}.*"] if len(chosen) == heads_per_layer else [str(head) for head in chosen]
    return ", ".join(pieces)


class Intervention:
    """What happens in one forward pass: capture_attention hands `apply` each layer's head outputs [batch, n, heads,
    d_v], and each layer's pre-hook hands `residual` the layer's input [batch, n, d_model]; what they return goes on."""

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        return out

    def residual(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        return hidden


@dataclasses.dataclass
class Recorded(Intervention):
    """Changes nothing; keeps every layer's head outputs and its input from the residual stream (a clean run's, for
    patches; a text's, for its means)."""

    outputs: dict[int, torch.Tensor] = dataclasses.field(default_factory=dict)
    inputs: dict[int, torch.Tensor] = dataclasses.field(default_factory=dict)

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        self.outputs[layer] = out[0].clone()  # [n, heads, d_v]
        return out

    def residual(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        self.inputs[layer] = hidden[0].clone()  # [n, d_model]
        return hidden


@dataclasses.dataclass(frozen=True)
class KnockOut(Intervention):
    """The heads' outputs replaced, at every position: by zero, or by `means[layer]` [heads, d_v]."""

    heads: tuple[Head, ...]
    means: dict[int, torch.Tensor] | None = None

    def apply(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        chosen = [head.head for head in self.heads if head.layer == layer]
        if not chosen:
            return out
        out = out.clone()
        out[:, :, chosen] = 0.0 if self.means is None else self.means[layer][chosen].to(out.dtype)
        return out


def layers_of(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The model's stack of layers: its first ModuleList with one entry per layer (Llama's model.layers, GPT-2's h,
    BERT's encoder.layer)."""
    count = model.config.num_hidden_layers
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == count:
            return module
    raise ValueError(f"the {model.config.model_type} model has no list of its {count} layers to patch between")


def listen_to_residuals(model: torch.nn.Module) -> None:
    """Give every layer of the model a pre-hook that hands its input to the call's Intervention (once; inert in a
    call without one)."""
    for index, layer in enumerate(layers_of(model)):
        if getattr(layer, "residual_hook", None) is None:
            layer.residual_index = index
            layer.residual_hook = layer.register_forward_pre_hook(_residual_in, with_kwargs=True)


def stop_listening(model: torch.nn.Module) -> None:
    """Take the pre-hooks off again (a notebook's own model is left as it was)."""
    for layer in layers_of(model):
        if getattr(layer, "residual_hook", None) is not None:
            layer.residual_hook.remove()
            layer.residual_hook = None


def _residual_in(module, args, kwargs):
    intervention = kwargs.get("intervention")
    if intervention is None:
        return None
    hidden = args[0] if args else kwargs["hidden_states"]
    changed = intervention.residual(module.residual_index, hidden)
    if changed is hidden:
        return None
    return ((changed, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": changed})


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What the model says after a text: the next token's logits [vocabulary], its top choices, and the whole text's
    loss (each token's cross-entropy given the ones before it, on average; nats; None for one token, which has no
    token after it in the text to predict)."""

    logits: torch.Tensor
    top: tuple[tuple[str, float], ...]
    loss: float | None

    @property
    def probabilities(self) -> torch.Tensor:
        return torch.softmax(self.logits.double(), dim=-1)


def logits_after(loaded, ids: torch.Tensor, intervention: Intervention | None, last: bool = False) -> torch.Tensor:
    """The model's logits [batch, n, vocabulary] at every position of each row of `ids` [batch, n], run with the
    intervention; `last`: at the last position only [batch, 1, vocabulary], where the model can skip the others
    (its language-model head over 49k tokens is a fifth of a patched run of SmolLM2)."""
    listen_to_residuals(loaded.model)
    keep = {"logits_to_keep": 1} if last and "logits_to_keep" in inspect.signature(loaded.lm.forward).parameters else {}
    with torch.inference_mode():
        logits = loaded.lm(input_ids=ids.to(loaded.device), intervention=intervention, use_cache=False, **keep).logits
    return logits.float().cpu()


def _predictions(loaded, ids: torch.Tensor, intervention: Intervention | None) -> list[Prediction]:
    """The model's Prediction after each row of `ids` [batch, n], run with the intervention."""
    logits = logits_after(loaded, ids, intervention)
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none").mean(1)
    found = []
    for row, loss in zip(logits[:, -1], losses, strict=True):
        best = torch.softmax(row.double(), dim=-1).topk(TOP)
        raw = loaded.tokenizer.convert_ids_to_tokens(best.indices.tolist())
        names = [readable_token(loaded.tokenizer, name) for name in raw]
        top = tuple(zip(names, best.values.tolist(), strict=True))
        found.append(Prediction(row, top, float(loss) if ids.shape[1] > 1 else None))
    return found


def prompt_ids(loaded, text: str, cut: bool = False) -> torch.Tensor:
    """The text's tokens [1, n] as the model reads them: a decoder's without special tokens, an encoder's with;
    `cut`: the first token_cap of a longer text, as the page's maps read it (else it is refused)."""
    cap = loaded.info.token_cap
    with TOKENIZING:  # truncation is set on the tokenizer's shared object (capture.py)
        ids = loaded.tokenizer(
            text, add_special_tokens=loaded.lm is None, truncation=cut, max_length=cap if cut else None
        )
    ids = ids["input_ids"]
    if not 1 <= len(ids) <= cap:
        raise ValueError(f"a prompt has 1 to {loaded.info.token_cap} tokens on {loaded.info.title}; got {len(ids)}")
    return torch.tensor([ids])


def token_id(loaded, word: str) -> int:
    """The one token a target word is; a word of several tokens (its pieces named) or none is refused."""
    ids = loaded.tokenizer(word, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        names = loaded.tokenizer.convert_ids_to_tokens(ids)
        pieces = " + ".join(repr(readable_token(loaded.tokenizer, name)) for name in names)
        raise ValueError(f"the target {word!r} must be one token; it is {len(ids)}: {pieces or 'none'}")
    return ids[0]


@dataclasses.dataclass(frozen=True)
class KnockedOut:
    """A text's prediction before and after its heads were knocked out, and the target's share of it."""

    heads: tuple[Head, ...]
    mode: str  # "zero" or "mean"
    before: Prediction
    after: Prediction
    target: int  # the token whose probability and logit are followed (by default the model's own first choice)
    target_name: str

    @property
    def kl(self) -> float:
        """KL(before ‖ after) of the next token, in nats: how far the knock-out moved the whole distribution."""
        p, q = self.before.probabilities, self.after.probabilities
        return float((p * (p.clamp_min(1e-300).log() - q.clamp_min(1e-300).log())).sum())


@dataclasses.dataclass(frozen=True)
class EmbeddingMoved:
    """An encoder's sentence embedding (the mean of its tokens' last hidden states, normalized: how
    all-MiniLM-L6-v2 makes one) before and after its heads were knocked out."""

    heads: tuple[Head, ...]
    mode: str
    tokens: tuple[str, ...]
    cosine: float  # between the embeddings before and after (1: unmoved)
    token_cosines: tuple[float, ...]  # each token's last hidden state, before against after


def _means(loaded, ids: torch.Tensor, mode: str, run) -> tuple[object, dict | None]:
    """The stock run (`run(ids, recorded)`) and each layer's head outputs' mean over the text (mode "mean")."""
    if mode not in ("zero", "mean"):
        raise ValueError(f"a knock-out sets a head's output to zero or to its mean; got {mode!r}")
    recorded = Recorded()
    stock = run(ids, recorded)
    return stock, ({layer: out.mean(0) for layer, out in recorded.outputs.items()} if mode == "mean" else None)


def knock_out(
    loaded, text: str, heads: tuple[Head, ...], mode: str = "zero", target: str | None = None, cut: bool = False
):
    """The text's prediction with `heads` knocked out, each one's output set to zero or to its mean over the text's
    positions in the stock run ("mean"): a KnockedOut; on an encoder, how far its sentence embedding moves
    (EmbeddingMoved). `cut`: a text over the model's token cap is read to the cap (prompt_ids)."""
    ids = prompt_ids(loaded, text, cut)
    if loaded.lm is None:
        return _embedding_moved(loaded, ids, heads, mode)
    (before,), means = _means(loaded, ids, mode, lambda i, r: _predictions(loaded, i, r))
    (after,) = _predictions(loaded, ids, KnockOut(heads, means)) if heads else (before,)  # none: one run
    chosen = int(before.logits.argmax()) if target is None else token_id(loaded, target)
    name = readable_token(loaded.tokenizer, loaded.tokenizer.convert_ids_to_tokens([chosen])[0])
    return KnockedOut(heads, mode, before, after, chosen, name)


def _embedding_moved(loaded, ids: torch.Tensor, heads: tuple[Head, ...], mode: str) -> EmbeddingMoved:
    def hidden(ids: torch.Tensor, intervention: Intervention) -> torch.Tensor:
        with torch.inference_mode():
            out = loaded.model(input_ids=ids.to(loaded.device), intervention=intervention).last_hidden_state
        return out[0].double().cpu()  # [n, d_model]

    stock, means = _means(loaded, ids, mode, hidden)
    knocked = hidden(ids, KnockOut(heads, means)) if heads else stock
    sentence = [torch.nn.functional.normalize(h.mean(0), dim=0) for h in (stock, knocked)]
    tokens = loaded.tokenizer.convert_ids_to_tokens(ids[0].tolist())
    return EmbeddingMoved(
        heads,
        mode,
        tuple(readable_token(loaded.tokenizer, name) for name in tokens),
        float(sentence[0] @ sentence[1]),
        tuple(torch.nn.functional.cosine_similarity(stock, knocked, dim=1).tolist()),
    )


__all__ = [
    "EmbeddingMoved",
    "Head",
    "Intervention",
    "KnockOut",
    "KnockedOut",
    "Prediction",
    "Recorded",
    "knock_out",
    "listen_to_residuals",
    "logits_after",
    "parse_heads",
    "prompt_ids",
    "stop_listening",
    "token_id",
    "written",
]
