"""Reading a trained model's attention beyond one head: across layers (rollout), by what each weight moves
(norm-based attention), and by words instead of the tokenizer's pieces. Pure tensor math.

Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): a layer's output is
its attention plus the residual connection, so each layer is modelled as Â_l = ½·A_l + ½·I, with A_l the mean
of its heads' weights; what token i draws on through layers 1..L is row i of Â_L ··· Â_2 · Â_1. Every Â_l's
rows sum to 1, so the product's rows do too.

Norm-based attention (Kobayashi et al. 2020, "Attention is Not Only a Weight"): a head's output for token i
is Σ_j α_ij · v_j·W_O^h, a sum of vectors; a weight on a token whose vector is short moves little.
‖α_ij · v_j·W_O^h‖ says how much each key really contributes.

Words (BertViz #23, #40): a word split into pieces ("token", "##ization") is shown as one row and one column:
the word's row is the mean of its pieces' rows (each is a query in its own right), and its column the sum of
its pieces' columns (weight on any piece is weight on the word), so each row still sums to 1.
"""

from __future__ import annotations

import torch


def rollout(layers: list[torch.Tensor], upto: int | None = None) -> torch.Tensor:
    """[n, n]: attention rollout through the first `upto` layers (all by default); `layers` holds each layer's
    weights [h, n, n]. Row i: how much of token i's representation after those layers comes from each token."""
    chosen = layers[: len(layers) if upto is None else upto]
    if not chosen:
        raise ValueError("rollout needs at least one layer")
    n = chosen[0].shape[-1]
    identity = torch.eye(n, dtype=torch.float64)
    rolled = identity
    for weights in chosen:
        mixed = 0.5 * weights.double().mean(dim=0).cpu() + 0.5 * identity  # Â_l: heads averaged, plus the residual
        rolled = mixed @ rolled  # Â_l · (Â_{l-1} ··· Â_1)
    return rolled


def value_norms(v: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """[h, n_keys]: ‖v_j·W_O^h‖ for every head h and key j, what key j would add to head h's output at weight 1.
    v [h, n_keys, d_v] (one per query head); w_o [h·d_v, d_model], head h's rows h·d_v … (h+1)·d_v − 1."""
    h, _, d_v = v.shape
    per_head = w_o.double().reshape(h, d_v, -1)  # [h, d_v, d_model]
    return (v.double() @ per_head).norm(dim=-1)


def weighted_norms(weights: torch.Tensor, norms: torch.Tensor) -> torch.Tensor:
    """[h, n, n_keys]: ‖α_ij · v_j·W_O^h‖ = α_ij · ‖v_j·W_O^h‖ (weights are ≥ 0): weights [h, n, n_keys], norms
    [h, n_keys] from value_norms."""
    return weights.double() * norms.double().unsqueeze(-2)


def weighted_vectors(weights: torch.Tensor, v: torch.Tensor, w_o: torch.Tensor) -> torch.Tensor:
    """[n, n_keys, d_model] for one head: each α_ij · v_j·W_O^h (weights [n, n_keys], v [n_keys, d_v], w_o
    [d_v, d_model]); summed over j they give the head's output, the check that these are its parts."""
    return weights.double().unsqueeze(-1) * (v.double() @ w_o.double()).unsqueeze(0)


def word_groups(word_ids: list[int | None]) -> list[list[int]]:
    """The positions of each word, in order, from the tokenizer's word index per token (None for a special
    token, which is a word of its own)."""
    groups: list[list[int]] = []
    last = object()
    for position, word in enumerate(word_ids):
        if word is None or word != last:
            groups.append([position])
        else:
            groups[-1].append(position)
        last = word if word is not None else object()
    return groups


def merge_words(weights: torch.Tensor, groups: list[list[int]]) -> torch.Tensor:
    """[..., w, w] from [..., n, n]: each word's row the mean of its pieces' rows, its column the sum of its
    pieces' columns. Rows that summed to 1 still do."""
    n = weights.shape[-1]
    member = torch.zeros(len(groups), n, dtype=torch.float64)
    for word, positions in enumerate(groups):
        member[word, positions] = 1.0
    mean_rows = member / member.sum(dim=-1, keepdim=True)
    return mean_rows @ weights.double() @ member.T


def merged_tokens(tokens: tuple[str, ...], groups: list[list[int]]) -> tuple[str, ...]:
    """Each word's text from its pieces: "token" + "##ization" -> "tokenization"; BPE pieces joined as they are."""
    return tuple("".join(tokens[i].removeprefix("##") if k else tokens[i] for k, i in enumerate(g)) for g in groups)
