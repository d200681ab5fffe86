"""FlashAttention's online softmax (issue 43 part 3, attention_core/tiling.py) against PyTorch's own attention in
float64: the tiled result equals softmax·V at every block size (1, every size between, larger than n), with and
without the causal mask; after every block it is the softmax over the keys seen so far; a row that has seen only
hidden keys is no NaN. The tolerance is float32's rounding over the sums and rescalings the loop does, and it
rejects the loop's classic mistake (blocks added without rescaling to the new max)."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from attention_core import AttentionConfig, trace_sentence
from attention_core.tiling import tiled_output, tiled_steps, traffic
from figures.cache import amount
from figures.stages import stage_view, stages_for
from figures.stages.tiles import LONG, QUERY_ROWS, SHOWN_MOST, TOKENS_MOST
from tests import numerics as nm

pytestmark = pytest.mark.numeric

N, D = 9, 4


def inputs(seed: int = 0, spread: float = 3.0):
    """q, k, v in float32 with scores spread wide enough that the running max changes from block to block."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (spread * torch.randn(N, D, generator=generator) for _ in range(3))
    return q, k, v


def reference(q, k, v, hidden=None, keys: int | None = None) -> torch.Tensor:
    """softmax(q kᵀ/√d)·v over the first `keys` keys, by PyTorch's own attention in float64 (not this app's)."""
    keys = k.shape[0] if keys is None else keys
    allowed = None if hidden is None else ~hidden[:, :keys]
    return F.scaled_dot_product_attention(q.double(), k[:keys].double(), v[:keys].double(), attn_mask=allowed)


def allowed(q, k, v, blocks: int) -> torch.Tensor:
    """float32's rounding of the loop, per output value: each output is a sum of n_k terms w_j·v_j, each weight
    rounded by the score's dot product (d terms), its exp at a shifted max, and every rescale of the blocks after it
    (one per block); γ of that many roundings, of the terms' sizes |w|·|v| (w from float64)."""
    w = torch.softmax((q.double() @ k.double().T) / math.sqrt(D), dim=-1)
    steps = 4 * (D + k.shape[0] + blocks + 4)
    return nm.gamma(steps, nm.unit_roundoff(torch.float32)) * (w @ v.double().abs()) + 1e-30


CAUSAL = torch.ones(N, N, dtype=torch.bool).triu(1)  # True where hidden: the pages' causal mask


@pytest.mark.parametrize("block", [1, 2, 3, 4, 5, 8, N, N + 1, 4 * N])
@pytest.mark.parametrize("hidden", [None, CAUSAL], ids=["full", "causal"])
def test_the_tiled_result_is_softmax_times_v_at_every_block_size(block, hidden):
    q, k, v = inputs()
    ours = tiled_output(q, k, v, block, 1 / math.sqrt(D), hidden)
    expected = reference(q, k, v, hidden)
    off = (ours.double() - expected).abs()
    assert bool((off <= allowed(q, k, v, math.ceil(N / block))).all()), float(off.max())
    assert len(tiled_steps(q, k, v, block, 1 / math.sqrt(D), hidden)) == math.ceil(N / block)


@pytest.mark.parametrize("block", [1, 2, 4])
def test_after_every_block_the_output_is_the_softmax_over_the_keys_seen_so_far(block):
    q, k, v = inputs(seed=1)
    for step in tiled_steps(q, k, v, block, 1 / math.sqrt(D)):
        seen = step.keys.stop
        expected = reference(q, k, v, keys=seen)
        assert step.scores.shape == (N, len(step.keys))  # no step holds more than n × block scores
        off = (step.normalised.double() - expected).abs()
        assert bool((off <= allowed(q, k[:seen], v[:seen], seen)).all()), (seen, float(off.max()))
        assert bool((step.rescale <= 1).all())  # the max only grows: earlier sums shrink into its units


def test_a_row_that_has_seen_only_hidden_keys_stays_zero_and_then_counts():
    q, k, v = inputs(seed=2)
    hidden = torch.zeros(N, N, dtype=torch.bool)
    hidden[0, :-1] = True  # row 0 sees only the last key: every block before it is hidden from it
    steps = tiled_steps(q, k, v, 2, 1 / math.sqrt(D), hidden)
    assert not any(step.out.isnan().any() or step.l.isnan().any() for step in steps)
    assert all(float(step.l[0]) == 0.0 and bool((step.normalised[0] == 0).all()) for step in steps[:-1])
    torch.testing.assert_close(steps[-1].normalised[0], v[-1])  # one key: its value, whole


def test_the_tolerance_sees_blocks_added_without_rescaling():
    """The planted mistake: each block's exps taken at its own max and added up as they are. It must fail."""
    q, k, v = inputs()
    scores = (q @ k.T) / math.sqrt(D)
    out, total = torch.zeros(N, D), torch.zeros(N)
    for start in range(0, N, 3):
        s = scores[:, start : start + 3]
        p = torch.exp(s - s.max(dim=-1, keepdim=True).values)
        out, total = out + p @ v[start : start + 3], total + p.sum(-1)
    wrong = out / total[:, None]
    off = (wrong.double() - reference(q, k, v)).abs()
    assert not bool((off <= allowed(q, k, v, 3)).all())


def test_a_block_of_no_keys_is_refused():
    q, k, v = inputs()
    with pytest.raises(ValueError, match="block must be at least 1 key; got 0"):
        tiled_steps(q, k, v, 0, 1.0)


def counted_bytes(n: int, d: int, query_block: int, number: int = 4) -> tuple[int, int]:
    """The bytes each kernel moves to and from the GPU's main memory, counted by walking its loops (not by
    tiling.traffic's formula). Naive: Q, K, V read; S written, then read by the softmax, which writes P; P and V read
    by P·V, which writes O. Tiled: for each block of query rows, its Q rows read, every block of K and V read, its O
    rows written; S and P stay on chip."""
    naive = [("read", "Q", n * d), ("read", "K", n * d), ("write", "S", n * n), ("read", "S", n * n),
             ("write", "P", n * n), ("read", "P", n * n), ("read", "V", n * d), ("write", "O", n * d)]  # fmt: skip
    tiled = []
    for start in range(0, n, query_block):
        rows = min(query_block, n - start)
        tiled.append(("read", "Q", rows * d))
        for key_start in range(0, n, query_block):
            keys = min(query_block, n - key_start)
            tiled += [("read", "K", keys * d), ("read", "V", keys * d)]
        tiled.append(("write", "O", rows * d))
    return sum(size for *_, size in naive) * number, sum(size for *_, size in tiled) * number


@pytest.mark.parametrize(("n", "d", "block"), [(4, 2, 2), (5, 3, 2), (64, 16, 64), (1000, 64, 128), (4096, 64, 128)])
def test_the_memory_traffic_is_what_the_loops_move(n, d, block):
    assert (traffic(n, d, block).naive, traffic(n, d, block).tiled) == counted_bytes(n, d, block)


def test_the_memory_traffic_grows_as_n_squared_only_for_the_naive_kernel():
    one_block = traffic(n=64, d=16, query_block=64)
    assert one_block.tiled == 4 * 64 * 16 * 4  # the whole sequence on chip: every matrix moved once
    ratios = [traffic(n, 64, 128).naive / traffic(n, 64, 128).tiled for n in (1024, 4096, 16384)]
    assert ratios == sorted(ratios) and ratios[0] > 1  # the n² the naive kernel writes grows faster
    with pytest.raises(ValueError, match="at least 1"):
        traffic(n=0, d=1, query_block=1)


# The tiles stage (figures/stages/tiles.py): every number its words say, against what the words claim.


def tiles_view(text: str, block: str, **config):
    trace = trace_sentence(text, AttentionConfig(**config))
    return trace, stage_view(trace, "tiles", 0, options={"tile_block": block})


@pytest.mark.parametrize("block", ["1", "2", "3", "256"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_tiles_stage_says_its_steps_its_result_and_its_traffic(block, causal):
    trace, view = tiles_view("The next day is bright", block, causal=causal)
    n, held = 5, min(int(block), 5)
    steps = -(-n // held)
    if held < n:
        keys = f"{held} key{'s' if held > 1 else ''}"
        assert f"{steps} blocks of {keys}: 5×{held} scores at a time, not 5×5." in view.explanation
    else:
        assert "One block of all 5 keys: the whole 5×5 matrix at once" in view.explanation
    # The sentence's number, against a reference that is not ours (PyTorch's attention in float64): the tiled
    # result and the ·V stage are each that softmax·V within float32's rounding of the loop (allowed()), so they
    # are within twice it of each other.
    said = re.search(r"At the end O ÷ ℓ (?:is within ([\d.e+-]+) of|equals, to the last bit,) the ·V stage\.",
                     view.explanation)  # fmt: skip
    assert said, view.explanation
    q, k, v = trace.q[0], trace.k[0], trace.v[0]
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=trace.mask,
                                              scale=trace.scale)  # fmt: skip
    scores = q.double() @ k.double().T * trace.scale
    w = torch.softmax(scores if trace.mask is None else scores.masked_fill(~trace.mask, float("-inf")), dim=-1)
    bound = nm.gamma(4 * (trace.d_qk + n + steps + 4), nm.unit_roundoff(torch.float32)) * (w @ v.double().abs())
    assert bool(((trace.context[0].double() - expected).abs() <= bound).all())
    assert float(said.group(1) or 0) <= 2 * float(bound.max())
    here, long = traffic(5, trace.d_qk, QUERY_ROWS), traffic(LONG, trace.d_qk, QUERY_ROWS)
    said = (
        f"{amount(here.naive, 1)} vs {amount(here.tiled, 1)} here; {amount(long.naive, 1)} vs {amount(long.tiled, 1)}"
    )
    assert said in view.explanation
    assert f"({long.naive / long.tiled:.1f}× less)" in view.explanation
    drawn = [m for m in view.matrices if m.name.startswith("tiles_after_block_")]
    assert len(drawn) == min(steps, SHOWN_MOST) and drawn[-1].name == f"tiles_after_block_{steps}"
    weights = trace.weights[0].double().numpy()
    # After the last block: the softmax's own weights, within float32's rounding of the loop and of the softmax (each
    # weight ≤ 1). After the first: the keys not yet seen weigh nothing, and a row of those seen sums to 1 within the
    # rounding of one row (2·held·u, as /check's rows).
    u = nm.unit_roundoff(torch.float32)
    assert abs(drawn[-1].values - weights).max() <= nm.gamma(4 * (n + steps + 4), u)
    if steps > 1:
        first = drawn[0].values
        assert (first[:, held:] == 0).all() and abs(first.sum(-1) - 1).max() <= nm.gamma(2 * held + 4, u)


def test_one_token_is_one_block_of_one_key():
    _, view = tiles_view("Hello", "2")
    assert "One block of all 1 key: the whole 1×1 matrix at once" in view.explanation


def test_a_small_block_on_a_long_sentence_is_raised_to_at_most_64_steps_and_the_stage_stops_at_512_tokens():
    _, view = tiles_view(" ".join(["token"] * 200), "1")
    assert "1 key a block would be 200 steps: 4 a block, at most 64 steps." in view.explanation
    assert "50 blocks of 4 keys: 200×4 scores at a time, not 200×200." in view.explanation
    long = trace_sentence(" ".join(["token"] * (TOKENS_MOST + 1)), AttentionConfig())
    assert "tiles" not in [stage.key for stage in stages_for(long)]
