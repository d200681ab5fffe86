"""The words the views use, defined once, and links to them (plain markdown; no Streamlit).

A link opens the Glossary page at the term (markdown links open in a new tab, so the lecture's
own tab keeps its view). The address is relative, so it also works behind a proxy's path prefix.
"""

from __future__ import annotations

import re

from attention_core.statistics import ROLES

# term -> definition (markdown). The order is the Glossary page's.
TERMS: dict[str, str] = {
    "Q, K, V": (
        "**Query, key, value**, named after a database lookup (lecture 001): the *query* is what you search "
        "with (a misspelled name typed at the desk, “Stammer”), the *keys* are what you search over (the names "
        "in the database, “Starmer”), the *value* is what comes back when a key matches (the room number, 537). "
        "In attention every token makes all three from its own vector: Q = X·W_Q, K = X·W_K, V = X·W_V. "
        "Unlike a database, every key matches a little, and the answer is a weighted mix of all the values."
    ),
    "d_model, d_k, d_v": (
        "**d_model** is the width of each token's vector in X (768 in GPT-2 small). **d_k** is the width of a "
        "head's queries and keys (they must match to take a dot product), **d_v** the width of its values and so "
        "of its context vectors; often d_k = d_v = d_model / heads (64 in GPT-2 small)."
    ),
    "scores vs weights": (
        "**Scores** S = Q·Kᵀ are raw dot products: any real number, rows sum to anything. **Weights** "
        "A = softmax(S / √d_k) are what the softmax makes of them: between 0 and 1, each row sums to 1, so a row "
        "says what share of its attention a token pays to each token."
    ),
    "√d_k": (
        "A dot product of d_k independent terms, each with variance 1, has variance d_k (adding dice: the more "
        "dice, the wider the sum spreads). Since Var(a·X) = a²·Var(X), dividing the scores by √d_k divides their "
        "variance by d_k, back to about 1, so the softmax does not turn one-hot just because d_k is large."
    ),
    "softmax": (
        "softmax(x)ᵢ = eˣⁱ / Σⱼ eˣʲ, taken along each row: every weight is positive, each row sums to 1, and "
        "larger scores get a larger share (by how much depends on how spread out the scores are)."
    ),
    "entropy and effective tokens": (
        "How **peaked** a row of weights is. **Entropy** −Σ w·log w is 0 when all the weight is on one token and "
        "log n when it is spread evenly over n tokens; **normalized entropy** divides by log n (0 = one-hot, "
        "1 = uniform). **Effective tokens** = e^entropy: a row spread evenly over 3 tokens has 3. **Max weight** "
        "is the row's largest weight."
    ),
    "causal mask": (
        "A decoder (GPT) may not let a token look at tokens after it: while it is trained on whole sentences, "
        "and while it writes text one token at a time, the future is not there to use. The mask sets those "
        "scores to −∞ before the softmax, so their weights are exactly 0. An encoder (BERT) has no such mask."
    ),
    "context vector": (
        "A token's output from one head: the weighted sum of every value vector it may see, weighted by its "
        "row of attention, c_i = Σⱼ A_ij·v_j. The heads' context vectors are concatenated and W_O maps them "
        "back to d_model."
    ),
    "multi-head": (
        "Several heads run side by side on the same X, each with its own W_Q, W_K, W_V, so each can learn to "
        "look for something else (in a trained model, one head might follow grammar, another what “he” refers "
        "to). Their context vectors are concatenated and W_O maps the result back to d_model."
    ),
    "KV cache": (
        "While a decoder writes, each new token's query meets the keys and values of every token before it. "
        "They do not change, so they are kept (cached), not computed again: per token and layer, MHA keeps "
        "h·(d_k + d_v) numbers. For long contexts this cache, not the weights, fills the GPU's memory, and the "
        "variants below exist to shrink it."
    ),
    "GQA": (
        "**Grouped-query attention**: several query heads share one key head and one value head, so a model "
        "keeps fewer keys and values in memory while it writes. SmolLM2 has 9 query heads and 3 key/value "
        "heads: heads 1–3 read key/value head 1, and so on. **MQA** (multi-query attention) is the extreme: "
        "one key/value head for all."
    ),
    "MLA": (
        "**Multi-head latent attention** (DeepSeek-V2): each token is squeezed into one small latent c_KV "
        "(d_c numbers) and every head up-projects its keys and values from it. The cache keeps c_KV and one "
        "small rotary key k^R per token: (512 + 64) per layer in DeepSeek-V2, 56.9× less than MHA at its "
        "sizes. W_UK can be folded into the query (absorption), so K is never formed while writing."
    ),
    "gated attention": (
        "**Gated attention** (Qwen3-Next; Qiu et al. 2025): each head multiplies its context by a gate σ(X·W_G) "
        "between 0 and 1, one per token and channel, before W_O. Softmax must give each row's weight to some key; "
        "the gate lets a head pass on nothing, which the paper finds removes the attention sink."
    ),
    "learned sink": (
        "**A learned sink** (gpt-oss): each head has one learned logit s that joins every row's softmax as a "
        "column no token owns, and is dropped after it. A row's weights then sum to 1 − the sink's share "
        "e^s / (Σⱼ e^S′ᵢⱼ + e^s): a head with nothing to look at can give its weight to no token, where softmax "
        "alone must park it on one (the attention sink). The cache is unchanged: s is one number per head."
    ),
    "differential attention": (
        "**Differential attention** (the Differential Transformer; DiffLlama): each head scores the tokens twice, "
        "with two pairs of queries and keys, takes a softmax of each and attends with their difference, "
        "A = A₁ − λ·A₂, λ learned. What both maps give a token cancels, as noise-cancelling headphones cancel what "
        "both microphones hear; a row sums to 1 − λ, and a weight may be negative. The cache keeps both keys."
    ),
    "K = V": (
        "**K = V** (DeepSeek-V4): each token makes one vector, and every head reads it as its key and as its value, "
        "so the cache keeps d_k numbers a token and layer, the least of any variant here. RoPE turns the vector's "
        "last dimensions as a key, so the value arrives turned too: each head turns its context back at the "
        "query's position, and what a value passes on then depends on how far back it is, not where."
    ),
    "RoPE": (
        "**Rotary positions**: instead of adding a position to X, each pair of a query's and a key's dimensions "
        "is turned by an angle that grows with the token's position. A turn keeps lengths, and q·k then depends "
        "on how far apart the two tokens are, not where they are (Llama, SmolLM2, DeepSeek)."
    ),
    "attention sink": (
        "A trained head that has nothing useful to look at still has to put its weight somewhere (each row sums "
        "to 1); many park it on the first token. A large weight on the first token then says little about "
        "meaning. SmolLM2 starts with no special token, so its first *word* takes that role. gpt-oss gives each "
        "head a learned sink instead, which no token is."
    ),
    "head roles": (
        "What a head of a trained model does, read from its weights: a **role** is the keys each row should look "
        "at, a row's score its weight on them, and a head's score the mean over the rows that have such a key "
        "(0 to 1; an exact pattern scores 1). The Real model page scores every head of every layer. "
        + " ".join(f"**{role.name.capitalize()}**: {role.definition}" for role in ROLES)
    ),
    "induction head": (
        "A head that finds an earlier copy of the current token and looks at the token that came *after* it, so "
        "the model can say next what came next last time (“Harry Potter … Harry” → “Potter”). It works with a "
        "previous-token head in an earlier layer, which writes into each token what came before it; the "
        "induction head's query then matches keys that were preceded by the current token. It is scored on a "
        "random sequence repeated twice, where only such a head can do well (Olsson et al. 2022)."
    ),
    "attention rollout": (
        "One map for all the layers at once (Abnar & Zuidema 2020): each layer's weights, averaged over its "
        "heads, become Â = ½·A + ½·I (half for the residual connection, which carries a token's own vector past "
        "attention), and the layers' maps are multiplied, Â_L ··· Â_1. Row i says how much of token i's final "
        "vector comes from each input token. Rows still sum to 1; a sink in every layer ends up with almost all "
        "of it."
    ),
    "ablation": (
        "Knocking a head out to see what it does: its output is set to zero (**zero ablation**) or to its mean over "
        "the text (**mean ablation**, which keeps what the head says on average and removes only what it says about "
        "this text), and the model's prediction is measured again. A head that looks hard at a token and changes "
        "nothing when knocked out is attention without effect; a sink head often is one."
    ),
    "activation patching": (
        "Two prompts the same length in tokens, a **clean** one (“When Mary and John went to the store, John gave a "
        "drink to” → “ Mary”) and a **corrupted** one (the second John a Mary). One piece of the clean run (a head's "
        "output, or the residual stream at one layer and position) is copied into the corrupted run, and the "
        "share of the logit difference it brings back is measured: 1 all of it, 0 none (Wang et al. 2022, the "
        "indirect-object circuit)."
    ),
    "causal tracing": (
        "Activation patching of the residual stream (Meng et al. 2022): the vector entering one layer at one "
        "position, copied from the clean run into the corrupted run. Its map, layer by position, shows where the "
        "information that decides the answer sits and when it moves: at the name's own position in early layers, "
        "at the last position in late ones."
    ),
    "logit difference": (
        "logit(target) − logit(foil) after a prompt: how much more the model favours one answer (“ Mary”) over "
        "its rival (“ John”). Unlike a probability it is not squashed by the softmax, and it is linear in the "
        "last residual vector, so what each patch recovers of it can be compared and added up."
    ),
    "sliding window": (
        "A causal mask that keeps only the last w keys (the query's own included): Mistral's and Gemma's. A "
        "decoder's KV cache then stops growing at w entries, whatever the text's length. What falls out of the "
        "window is reached only through the layers below, each reaching w further back. StreamingLLM (Xiao et al. "
        "2023) found that a window alone breaks a trained model once its first tokens fall out, because those "
        "are its attention sinks, and that keeping the first 4 tokens too (**sinks + window**) repairs it."
    ),
    "sparse attention": (
        "Each query reads only k of the keys it could see: **top-k** keeps the k it scores highest. "
        "DeepSeek-V3.2's sparse attention (DSA) chooses them with a small **lightning indexer**, "
        "I = Σ_j w_j · ReLU(q_j · k) over a few low-rank heads j, one choice for all the heads of a layer, so the "
        "kernel loads k keys instead of every one. The cache still holds every key: a later query may pick any."
    ),
    "compressed attention": (
        "**DeepSeek-V4**'s attention: one key/value head, read as both key and value (K = V), and in every layer a "
        "sliding window of the last 128 tokens. Two kinds of layer add compressed entries: **CSA** (compressed "
        "sparse attention) folds every 4 tokens into one entry with a learned softmax gate and lets a lightning "
        "indexer pick the entries each query reads; **HCA** (heavily compressed attention) folds every 128 tokens "
        "into one, all read. Its cache per token falls as the text grows: DeepSeek-V4-Flash keeps 3,295 numbers a "
        "token at 1M tokens, DeepSeek-V3.2 42,944 (docs/kv-cache.md)."
    ),
    "positional encoding": (
        "Attention by itself does not see word order: permute the tokens and the outputs are permuted the same "
        "way. Adding a position code to X (here the sinusoids of “Attention Is All You Need”; rotary positions "
        "in SmolLM2) makes the same word at another place a different row."
    ),
    "composed mask": (
        "A mask written as PyTorch's FlexAttention writes one: small functions (**mask_mod**s) of a query's "
        "position q and a key's position kv, True where q may see kv, joined with **and** (both keep the key) "
        "and **or** (either does). causal is kv ≤ q; window w keeps |q − kv| < w; sinks s the first s keys; "
        "prefix p lets the first p tokens see each other (a prefix-LM is causal or prefix p); document keeps a "
        "token's own sentence (packed documents; a run of marks, “...” or “?!”, ends one sentence, and a mark "
        "between digits, 3.5, or in an abbreviation such as e.g. ends none); dilated s every s-th key. A kernel "
        "cuts the matrix into blocks and never computes a block the mask empties: its **block mask** says which "
        "are empty, full or partial."
    ),
    "ALiBi": (
        "Attention with Linear Biases (Press et al. 2022; BLOOM, MPT): no position code at all; instead each "
        "score loses m_h·|i − j|, its head's slope times the distance. Slopes fall geometrically, m_h = 2^(−8h/H), "
        "so some heads look near and some far, and a model trained on short texts still reads longer ones. A "
        "**score_mod** in FlexAttention's words: a function that bends a score before the softmax."
    ),
    "soft cap": (
        "Gemma 2 bends every attention score s into c·tanh(s/c) with c = 50 (and its final logits with 30): "
        "small scores pass almost unchanged, and none leaves ±c, so no single score can make a softmax one-hot "
        "and training stays stable. A **score_mod**, as ALiBi and a relative position bias (T5: a learned "
        "number per head and distance, added) are."
    ),
}


def anchor(term: str) -> str:
    """The Glossary page's anchor for a term: "Q, K, V" -> "q-k-v", "√d_k" -> "sqrt-d-k"."""
    words = re.sub(r"[^a-z0-9]+", "-", term.lower().replace("√", "sqrt ")).strip("-")
    return words or "term"


def link(text: str, term: str | None = None) -> str:
    """Markdown: `text` linking to the Glossary's entry for `term` (default: the text itself)."""
    term = term or text
    if term not in TERMS:
        raise ValueError(f"glossary has no term {term!r}; it has {', '.join(TERMS)}")
    return f"[{text}](glossary#{anchor(term)})"
