"""Does this head matter? (attention_core/models/intervene.py): heads read as written; a knock-out and a patch are
stock transformers run with the test's own hook on each layer's W_O (o_proj), which sees the heads' outputs side by
side before it mixes them; a patch from a run into itself changes nothing; what is refused is named."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import transformers

from attention_core.models.capture import CAPTURE
from attention_core.models.intervene import (
    Head,
    Patches,
    Recorded,
    _predictions,
    knock_out,
    parse_heads,
    patch,
    token_id,
)


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


def _stock_logits(stock, ids: torch.Tensor, change) -> torch.Tensor:
    """Stock transformers on ids [b, n], each layer's o_proj input [b, n, heads·d] handed to change(layer, x) first."""
    hooks = [
        layer.self_attn.o_proj.register_forward_pre_hook(lambda _, args, i=i: (change(i, args[0].clone()),))
        for i, layer in enumerate(stock.model.layers)
    ]
    try:
        with torch.inference_mode():
            return stock(input_ids=ids, use_cache=False).logits.float()
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
    untouched = knock_out(loaded, TEXT, (), mode)
    assert torch.equal(untouched.after.logits, untouched.before.logits) and untouched.kl == 0


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
    clean = _stock_logits(stock, ids[CLEAN], lambda i, x: clean_in.setdefault(i, x))[0, -1]
    corrupted = _stock_logits(stock, ids[CORRUPTED], lambda i, x: x)[0, -1]
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

        logits = _stock_logits(stock, ids[CORRUPTED].repeat(HEADS, 1), patched)[:, -1]
        expected = [(float(row[target] - row[foil]) - low) / (high - low) for row in logits]
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
    with pytest.raises(ValueError, match="predicts no next token"):
        knock_out(minilm, TEXT, ())
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
    assert torch.equal(ax.patch(stock, smollm2.tokenizer, CLEAN, CORRUPTED, " Mary", " John").recovered,
                       patch(loaded, CLEAN, CORRUPTED, " Mary", " John").recovered)  # fmt: skip
    with pytest.raises(ValueError, match="heads: 'L9.H1' names layer 9; this model has layers 1 to 4"):
        ax.knock_out(stock, smollm2.tokenizer, TEXT, "L9.H1")
