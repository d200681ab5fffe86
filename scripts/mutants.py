"""Plant known bugs, one at a time, and see whether the fast tests catch each (`make mutants`).

    .venv/bin/python scripts/mutants.py [--jobs 2] [--only NAME ...] [--report docs/mutants.md]

Each mutant is a mistake a student or a tired engineer makes in attention_core/ or in the figure and claim code:
a wrong scale, a softmax over the wrong axis, a causal mask shifted by one, heads grouped wrongly, a rotation turned
the wrong way, a claim's threshold moved... For each, a copy of the repository gets the one change, and the fast
tier (`make check`'s tests) runs on it, stopping at the first failure (first on an unchanged copy, which must pass:
else any failure would count as a catch). A mutant is caught when a test fails; one that survives names a missing
test. The report (a table: the mutant, where, which test caught it, how long) is written
to docs/mutants.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ROOT / ".venv" / "bin" / "python"
FAST_TIER = "not browser and not models and not slow"  # the Makefile's `check`
COPY_IGNORED = shutil.ignore_patterns(".git", ".venv", "node_modules", "test-artifacts", "__pycache__", ".hypothesis",
                                      ".pytest_cache", ".ruff_cache")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    before: str  # occurs exactly once in the file
    after: str
    kind: str  # what kind of mistake it is
    # The tier it belongs to: () the fast one; else the test files that must catch it (a bug that only a browser or
    # a real model can show: the class's bar, the sweep inside SmolLM2), run with every marker.
    tier: tuple[str, ...] = ()


MUTANTS = (
    Mutant("scale 1/d_k instead of 1/√d_k", "attention_core/config.py",
           "return 1.0 / math.sqrt(self.d_qk) if self.scaled else 1.0",
           "return 1.0 / self.d_qk if self.scaled else 1.0", "wrong scale"),
    Mutant("softmax over the queries", "attention_core/engine.py",
           "return scaled_scores, torch.softmax(scaled_scores.to(softmax_dtype), dim=-1)",
           "return scaled_scores, torch.softmax(scaled_scores.to(softmax_dtype), dim=-2)", "wrong axis"),
    Mutant("masked softmax over the queries", "attention_core/engine.py",
           "weights = torch.softmax(masked_scores.to(softmax_dtype), dim=-1)",
           "weights = torch.softmax(masked_scores.to(softmax_dtype), dim=-2)", "wrong axis"),
    Mutant("causal mask shifted by one (a token hides itself)", "attention_core/composed.py",
           "lambda _, doc: lambda b, h, q, kv: kv <= q,",
           "lambda _, doc: lambda b, h, q, kv: kv < q,", "mask shifted"),
    Mutant("causal mask shifted by one (a token sees the next)", "attention_core/composed.py",
           "lambda _, doc: lambda b, h, q, kv: kv <= q,",
           "lambda _, doc: lambda b, h, q, kv: kv <= q + 1,", "mask shifted"),
    Mutant("context from the scores, not the weights", "attention_core/engine.py",
           "context = weights.to(v.dtype) @ v", "context = torch.softmax(scores, dim=-1).to(v.dtype) @ v",
           "wrong stage"),
    Mutant("heads repeated instead of grouped", "attention_core/variants/record.py",
           "return states if groups == 1 else states.repeat_interleave(groups, dim=-3)",
           "return states if groups == 1 else states.repeat(*([1] * (states.dim() - 3)), groups, 1, 1)",
           "heads grouped wrongly"),
    Mutant("heads split by a reshape without the transpose", "attention_core/trace.py",
           "return context.transpose(0, 1).reshape(n, h * d_v)", "return context.reshape(n, h * d_v)",
           "heads concatenated wrongly"),
    Mutant("RoPE turned the wrong way", "attention_core/rotary.py",
           "turned_half = torch.cat([-second, first], dim=-1)", "turned_half = torch.cat([second, -first], dim=-1)",
           "wrong rotation"),
    Mutant("RoPE pairs neighbours instead of halves", "attention_core/rotary.py",
           "first, second = t[..., :half], t[..., half:]",
           "first, second = t[..., 0::2], t[..., 1::2]", "wrong rotation"),
    Mutant("RoPE from position 1", "attention_core/rotary.py",
           "positions = torch.arange(start, start + n, dtype=torch.float64)",
           "positions = torch.arange(start + 1, start + n + 1, dtype=torch.float64)", "position off by one"),
    Mutant("RMSNorm by the root of the sum, not the mean", "attention_core/variants/record.py",
           "return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain",
           "return x * torch.rsqrt(x.pow(2).sum(dim=-1, keepdim=True) + eps) * gain", "wrong normalisation"),
    Mutant("MLA's values up-projected with W_UK", "attention_core/variants/mla/compute.py",
           'v_c = parts["c_kv"] @ w["w_uv"]  # [h, n, d_v]', 'v_c = parts["c_kv"] @ w["w_uk"]  # [h, n, d_v]',
           "wrong weight"),
    Mutant("absorbed scores without W_UK's transpose", "attention_core/variants/mla/compute.py",
           'absorbed = parts["q_c"] @ weights["w_uk"].transpose(-2, -1)',
           'absorbed = parts["q_c"] @ weights["w_uk"].transpose(-2, -1).flip(-1)', "wrong fold"),
    Mutant("a decoding step one position late", "attention_core/decoding.py",
           "new = variant.project(x_new, params, config, position)",
           "new = variant.project(x_new, params, config, position + 1)", "position off by one"),
    Mutant("the cached step forgets the scale", "attention_core/decoding.py",
           "scale = config.scale", "scale = 1.0",
           "wrong scale"),
    Mutant("the gate's sigmoid turned over, σ(−z)", "attention_core/variants/gated/compute.py",
           'gate = torch.sigmoid(x @ w["w_g"])', 'gate = torch.sigmoid(-(x @ w["w_g"]))', "wrong gate"),
    Mutant("a decoder hands W_O the context without its gate", "attention_core/decoding.py",
           'handed = variant.handed(stages["context"], new)', 'handed = stages["context"]', "gate left out"),
    Mutant("the trace's concat leaves the gate out", "attention_core/trace.py",
           "concat_heads(self.context if self.handed is None else self.handed)", "concat_heads(self.context)",
           "gate left out"),
    Mutant("the gate's sentence swaps the least and the most", "attention_core/variants/gated/look.py",
           "least, most = int(per_token.argmin()), int(per_token.argmax())",
           "least, most = int(per_token.argmax()), int(per_token.argmin())", "claim reversed"),
    Mutant("the sink's softmax drops the first column, not the sink's", "attention_core/engine.py",
           "return probabilities[..., :-1], probabilities[..., -1:]",
           "return probabilities[..., 1:], probabilities[..., :1]", "sink misplaced"),
    Mutant("a decoder's step leaves the sink out", "attention_core/decoding.py",
           "own = own_softmax(variant, params, projected.parts)", "own = {}", "sink left out"),
    Mutant("the tiles start each row without the sink", "attention_core/tiling.py",
           "l = torch.full((n,), 0.0 if sink is None else 1.0", "l = torch.full((n,), 0.0", "sink left out"),
    Mutant("/check's own stages leave the sink out", "attention_core/checking/mistakes.py",
           'logit = trace.parts["sink_logit"][:, 0, 0].double().cpu() if sink and',
           'logit = None if True else trace.parts["sink_logit"][:, 0, 0].double().cpu() if sink and', "sink left out"),
    Mutant("the sink's sentence swaps the most and the least", "attention_core/variants/look.py",
           "least, most = int(shares.argmin()), int(shares.argmax())",
           "least, most = int(shares.argmax()), int(shares.argmin())", "claim reversed"),
    Mutant("peakiness with a sink counts the sink's share as a token's", "attention_core/statistics.py",
           "    if sink or signed:\n        size = w.abs()",
           "    if signed:\n        size = w.abs()", "sink counted"),
    Mutant("differential attention adds λ·A₂ where it subtracts", "attention_core/engine.py",
           'weights = weights - lam.to(weights.dtype).reshape(-1, 1, 1) * shared["weights_2"]',
           'weights = weights + lam.to(weights.dtype).reshape(-1, 1, 1) * shared["weights_2"]', "wrong sign"),
    Mutant("differential attention's second map unmasked", "attention_core/engine.py",
           'shared["weights_2"] = masked_softmax(bend(scaled_2) if bend else scaled_2, mask)[1]',
           'shared["weights_2"] = masked_softmax(bend(scaled_2) if bend else scaled_2, None)[1]', "mask shifted"),
    Mutant("differential attention hands on its context without the norm",
           "attention_core/variants/differential/compute.py",
           "return (1 - LAMBDA_INIT) * rms_norm(context, 1.0, NORM_EPS)", "return (1 - LAMBDA_INIT) * context",
           "norm left out"),
    Mutant("differential attention's second query and key not turned by RoPE",
           "attention_core/variants/differential/compute.py",
           'q2, k2 = rotate_qk(x @ w["w_q2"], x @ w["w_k2"], config, {}, start)',
           'q2, k2 = x @ w["w_q2"], x @ w["w_k2"]', "wrong rotation"),
    Mutant("differential attention's λ without λ_init", "attention_core/variants/differential/compute.py",
           "return first - second + LAMBDA_INIT", "return first - second", "wrong weight"),
    Mutant("differential attention's second keys tiled, not interleaved",
           "attention_core/variants/differential/compute.py",
           'k2 = expand_kv(parts["k2_kv"], config.heads // config.kv_heads)',
           'k2 = parts["k2_kv"].repeat(config.heads // config.kv_heads, 1, 1)', "wrong head"),
    Mutant("peakiness of a signed row without the sizes", "attention_core/statistics.py",
           "        size = w.abs()\n", "        size = w\n", "wrong statistic"),
    Mutant("differential attention's sentence names the largest weight as the most negative",
           "attention_core/variants/differential/look.py",
           "row, key = divmod(int(difference.argmin()), difference.shape[1])",
           "row, key = divmod(int(difference.argmax()), difference.shape[1])", "claim reversed"),
    Mutant("differential attention's weights drawn on a scale from 0", "figures/stages/scores.py",
           "diverging=trace.signed,", "diverging=False,", "false sentence"),
    Mutant("/check's own stages leave differential attention's second map out", "attention_core/checking/mistakes.py",
           "if second and trace.signed:", "if False:", "second map left out"),
    Mutant("/check's output room without the norm's slope", "attention_core/checking/rounding.py",
           "slope = variant.handed_slope(trace.context.detach().double().cpu(), parts)",
           "slope = torch.zeros_like(trace.context.detach().double().cpu())", "room too tight"),
    Mutant("DeepSeek-V4's context turned on again, not back", "attention_core/variants/deepseek_v4/compute.py",
           "rotary.turn(context[..., -r:], -theta)", "rotary.turn(context[..., -r:], theta)",
           "wrong rotation"),
    Mutant("DeepSeek-V4's queries not normalised", "attention_core/variants/deepseek_v4/compute.py",
           "q = rms_norm(q, 1.0, NORM_EPS)", "q = q", "norm left out"),
    Mutant("DeepSeek-V4's rotary part put first", "attention_core/variants/deepseek_v4/compute.py",
           "q, kv = torch.cat([q[..., :-r], q_r], dim=-1)", "q, kv = torch.cat([q_r, q[..., :-r]], dim=-1)",
           "wrong rotation"),
    Mutant("DeepSeek-V4's output groups cut from the rows", "attention_core/variants/deepseek_v4/compute.py",
           "grouped = concat.reshape(concat.shape[0], groups, -1).transpose(0, 1)",
           "grouped = concat.reshape(groups, concat.shape[0], -1)", "wrong head"),
    Mutant("DeepSeek-V4's turn-back sentence counts the turned dimensions as kept",
           "attention_core/variants/deepseek_v4/look.py",
           'kept = f"the first {d - r} are handed on', 'kept = f"the first {r} are handed on', "false sentence"),
    Mutant("/check never names a context not turned back", "attention_core/checking/mistakes.py",
           'if "angles" not in trace.parts or trace.output is None:', "if True:", "turn back left out"),
    Mutant("/check's RoPE pairs turn all of q, not its rotary part", "attention_core/checking/mistakes.py",
           'q = torch.cat([e["q"][..., : e["q"].shape[-1] - r], q], dim=-1)', "q = q", "wrong rotation"),
    Mutant("a long text's causal mask one key late", "attention_core/long_maps.py",
           "later = torch.ones(stop - start, stop - start, dtype=torch.bool, device=q.device).triu(1)",
           "later = torch.ones(stop - start, stop - start, dtype=torch.bool, device=q.device).triu(2)",
           "mask shifted"),
    Mutant("the overview pools its rows by the mean", "attention_core/long_maps.py",
           "rows.append(_pool_columns(pooled.T, size, pool).T)", 'rows.append(_pool_columns(pooled.T, size, "mean").T)',
           "wrong pooling"),
    Mutant("a head's local share takes one token more", "attention_core/long_maps.py",
           "local += float((near * (distance < LOCAL)).sum(dtype=torch.float64))",
           "local += float((near * (distance <= LOCAL)).sum(dtype=torch.float64))", "off by one"),
    Mutant("the needle's weight leaves out its last token", "attention_core/models/needle.py",
           "shares[layer, head] = float(weights[first:stop].sum(dtype=torch.float64))",
           "shares[layer, head] = float(weights[first : stop - 1].sum(dtype=torch.float64))", "off by one"),
    Mutant("the answering row one before the question's end", "attention_core/models/needle.py",
           "before + len(content) - 1,", "before + len(content) - 2,", "off by one", ("tests/test_long_reads.py",)),
    Mutant("two readers of one text each run its pass", "attention_core/models/long_store.py",
           "one_pass = self._passes.setdefault(key, threading.Lock())", "one_pass = threading.Lock()",
           "shared work repeated", ("tests/test_long_reads.py",)),
    Mutant("a share under a thousandth said as 0.0 %", "figures/long.py",
           "    if share < 0.001:", "    if share < 0.0001:", "false sentence"),
    Mutant("a knock-out leaves a layer's last chosen head in", "attention_core/models/intervene.py",
           "chosen = [head.head for head in self.heads if head.layer == layer]",
           "chosen = [head.head for head in self.heads if head.layer == layer][:-1]", "head left out",
           ("tests/test_intervene.py",)),
    Mutant("an encoder's embedding is its first token's, not the mean", "attention_core/models/intervene.py",
           "sentence = [torch.nn.functional.normalize(h.mean(0), dim=0) for h in (stock, knocked)]",
           "sentence = [torch.nn.functional.normalize(h[0], dim=0) for h in (stock, knocked)]", "wrong pooling",
           ("tests/test_intervene.py",)),
    Mutant("a head patched with its clean output one position late", "attention_core/models/patching.py",
           "out[rows, :, heads] = self.clean[layer][:, heads].transpose(0, 1)",
           "out[rows, :, heads] = self.clean[layer].roll(1, 0)[:, heads].transpose(0, 1)", "position off by one",
           ("tests/test_intervene.py",)),
    Mutant("the residual stream patched a layer late", "attention_core/models/patching.py",
           "        if layer != self.layer:", "        if layer != self.layer + 1:", "layer off by one",
           ("tests/test_intervene.py",)),
    Mutant("one position too many left unrun as shared", "attention_core/models/patching.py",
           "shared = int((clean_ids[0] != corrupted_ids[0]).int().argmax())",
           "shared = int((clean_ids[0] != corrupted_ids[0]).int().argmax()) + 1", "off by one",
           ("tests/test_intervene.py",)),
    Mutant("a share measured from the corrupted run alone, not its batch's", "attention_core/models/patching.py",
           "shares = [(run - unpatched) / (prepared.high - prepared.low) for run in runs]",
           "shares = [(run - prepared.low) / (prepared.high - prepared.low) for run in runs]", "wrong baseline",
           ("tests/test_intervene.py",)),
    Mutant("a knock-out said to lower what it raises", "figures/effects.py",
           '("lowers" if q < p else "raises")', '("lowers" if q > p else "raises")', "claim reversed"),
    Mutant("a head at exactly half on the first token not called a sink", "figures/effects.py",
           "parked = (last_rows[..., 0] >= SINK)", "parked = (last_rows[..., 0] > SINK)", "false sentence"),
    Mutant("a click on the grid knocks out the head to its left", "app_pages/real_model/effects.py",
           'int(column.removeprefix("H")) - 1', 'int(column.removeprefix("H")) - 2', "wrong head",
           ("tests/test_browser_effects.py::test_a_click_on_the_grid_knocks_a_head_out_and_a_patch_draws_its_map",)),
    Mutant("GQA's cache counts every query head", "attention_core/variants/grouped/__init__.py",
           '"kv_heads",\n    "g·(d_k + d_v)",', '"heads",\n    "g·(d_k + d_v)",', "wrong cache size"),
    Mutant("entropy normalised by one key more", "attention_core/statistics.py",
           "log_allowed = torch.log(allowed.clamp(min=1.0))", "log_allowed = torch.log(allowed.clamp(min=1.0) + 1)",
           "wrong statistic"),
    Mutant("previous-token head looks at the next token", "attention_core/statistics.py",
           "return torch.eye(seq.n, dtype=torch.bool).roll(-1, dims=1).tril(-1)  # [i, i-1]",
           "return torch.eye(seq.n, dtype=torch.bool).roll(1, dims=1).triu(1)  # [i, i-1]", "wrong statistic"),
    Mutant("rollout without the residual", "attention_core/reading.py",
           "mixed = 0.5 * weights.double().mean(dim=0).cpu() + 0.5 * identity",
           "mixed = weights.double().mean(dim=0).cpu()", "wrong statistic"),
    Mutant("value norms from W_O's columns", "attention_core/reading.py",
           "per_head = w_o.double().reshape(h, d_v, -1)  # [h, d_v, d_model]",
           "per_head = w_o.double().reshape(d_v, h, -1).transpose(0, 1)  # [h, d_v, d_model]", "wrong weight"),
    Mutant("variance with n − 1", "attention_core/scaling.py",
           "return float(t.double().var(unbiased=False))", "return float(t.double().var(unbiased=True))",
           "wrong statistic"),
    Mutant("a small number written 0.00", "figures/describe.py",
           "if value != 0 and abs(value) < 0.005:", "if value != 0 and abs(value) < 0.0005:", "false sentence"),
    Mutant("'about 1' from 0.3", "figures/stages/scores.py",
           "NEAR_ONE = (0.5, 2.0)", "NEAR_ONE = (0.3, 2.0)", "claim's threshold moved"),
    Mutant("unit variance from 0.5", "figures/stages/scores.py",
           "UNIT_VARIANCE = (0.8, 1.25)", "UNIT_VARIANCE = (0.5, 1.25)", "claim's threshold moved"),
    Mutant("step size that never falls", "attention_core/training/loop.py",
           "return config.lr * (1 - (1 - LAST_LR) * (step - start) / (config.steps - start))", "return config.lr",
           "wrong training rule"),
    # Written since the first run (issue 50): the masks after MLA, the tiles, /check, the class, your own checkpoints.
    Mutant("a sliding window one key wider", "attention_core/masks.py",
           'lambda w: _and(_piece("causal"), _piece("window", w))',
           'lambda w: _and(_piece("causal"), _piece("window", w + 1))', "mask shifted"),
    Mutant("one sink more than asked", "attention_core/masks.py",
           '_piece("sinks", SINKS)', '_piece("sinks", SINKS + 1)', "mask shifted"),
    Mutant("top-k sees the future where a row has fewer than k keys", "attention_core/masks.py",
           "return (above | (tied & (tied.cumsum(dim=-1) <= places))) & visible",
           "return above | (tied & (tied.cumsum(dim=-1) <= places))", "mask shifted"),
    Mutant("DSA's indexer without its ReLU", "attention_core/masks.py",
           "return torch.relu(scaled_scores).sum(dim=0)", "return scaled_scores.sum(dim=0)", "wrong statistic"),
    Mutant("the online softmax forgets to rescale its sum", "attention_core/tiling.py",
           "l = rescale * l + p.sum(dim=-1)", "l = l + p.sum(dim=-1)", "wrong fold"),
    Mutant("tiled traffic with the blocks of rows rounded down", "attention_core/tiling.py",
           "2 * n * d * math.ceil(n / query_block)", "2 * n * d * (n // query_block)", "wrong cache size"),
    Mutant("/check's allowance ten times float32's rounding", "attention_core/checking/rounding.py",
           "TIMES = 4.0", "TIMES = 40.0", "claim's threshold moved"),
    Mutant("/check's allowance without the measured rounding", "attention_core/checking/rounding.py",
           "return TIMES * rounding + ULPS * max(1.0, size)", "return ULPS * max(1.0, size)",
           "claim's threshold moved"),
    Mutant("/check lets a hidden key keep a small weight", "attention_core/checking/rounding.py",
           "seen = (hidden_keys & (got.abs() > HIDDEN_WEIGHT)).nonzero()",
           "seen = (hidden_keys & (got.abs() > 1e-2)).nonzero()", "claim's threshold moved"),
    Mutant("/check's inputs swap the window and its sinks", "attention_core/checking/files.py",
           'return {"window": window[1] if window else 0, "sinks": window[0] if window else 0',
           'return {"window": window[0] if window else 0, "sinks": window[1] if window else 0', "wrong weight"),
    Mutant("join codes guessed without a limit", "classroom/classes.py",
           "if tries > MAX_TRIES:", "if tries > MAX_TRIES * 100:", "false sentence"),
    Mutant("the reveal keeps the answer hidden", "classroom/classes.py",
           "shown = dataclasses.replace(asked, revealed=True)", "shown = dataclasses.replace(asked, revealed=False)",
           "false sentence"),
    Mutant("a class that never expires in memory", "classroom/store.py",
           "if value is not None and value[1] < time.monotonic():",
           "if value is not None and value[1] < time.monotonic() - 1e9:", "wrong cache size"),
    Mutant("the question's answer read from the first token's row", "classroom/questions.py",
           "best = tokens[int(trace.weights[0, -1].argmax())]", "best = tokens[int(trace.weights[0, 0].argmax())]",
           "wrong axis"),
    Mutant("your checkpoint's heads read interleaved", "attention_core/checkpoints/heads.py",
           '"w_q": q.reshape(d, h, d_k).permute(1, 0, 2),', '"w_q": q.reshape(d, d_k, h).permute(2, 0, 1),',
           "heads concatenated wrongly"),
    Mutant("GPT-2's c_attn thirds read as q, v, k", "attention_core/checkpoints/layouts.py",
           "q, k, v = full.chunk(3, dim=1)", "q, v, k = full.chunk(3, dim=1)", "wrong weight"),
    Mutant("a .pt checkpoint unpickled", "attention_core/checkpoints/reading.py",
           'torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)',
           'torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)', "false sentence"),
    Mutant("the decoder's cache keeps what the window dropped", "attention_core/decoding.py",
           "read = [j for j in range(t) if window is None or bool(window[t, j])]", "read = list(range(t))",
           "wrong cache size"),
    Mutant("the sweep counts the weight kept as lost", "attention_core/models/sparse.py",
           "self.lost.append((full * ~keep).sum(dim=-1)[0].double().cpu())",
           "self.lost.append((full * keep).sum(dim=-1)[0].double().cpu())", "wrong statistic",
           ("tests/test_sparse.py",)),
    Mutant("DSA's choice made per head inside the model", "attention_core/models/sparse.py",
           "keep = mask.kept(n, self.budget, chosen)[:, None]", "keep = mask.kept(n, self.budget, masked_scores)",
           "heads grouped wrongly", ("tests/test_sparse.py",)),
    Mutant("a student who broke away still follows", "ui/classroom.py",
           'if now is None or here["away"] or now.version == here["version"]:',
           'if now is None or now.version == here["version"]:', "false sentence", ("tests/test_browser_class.py",)),
    # Masks you compose and scores you bend (attention_core/composed.py, bends.py), against FlexAttention.
    Mutant("and and or swapped in a composition", "attention_core/composed.py",
           'join = torch.logical_and if self.op == "and" else torch.logical_or',
           'join = torch.logical_or if self.op == "and" else torch.logical_and', "mask composed"),
    Mutant("a window one key wider", "attention_core/composed.py",
           "lambda w, doc: lambda b, h, q, kv: (q - kv).abs() < w",
           "lambda w, doc: lambda b, h, q, kv: (q - kv).abs() <= w", "mask shifted"),
    Mutant("a sentence that starts at its own mark", "attention_core/composed.py",
           "return torch.cumsum(ends, 0) - ends", "return torch.cumsum(ends, 0)", "mask shifted"),
    Mutant("the cells past n counted as kept in a block", "attention_core/composed.py",
           "padded = torch.zeros(count * block, count * block, dtype=torch.float64, device=mask.device)",
           "padded = torch.ones(count * block, count * block, dtype=torch.float64, device=mask.device)", "blocks"),
    Mutant("a tile computed only where every query sees a key", "attention_core/tiling.py",
           "return sees.reshape(-1, block).any(dim=1).repeat_interleave(block)[:n]",
           "return sees.reshape(-1, block).all(dim=1).repeat_interleave(block)[:n]", "blocks"),
    Mutant("ALiBi's penalty added", "attention_core/bends.py",
           "score - slopes[h] * (q - kv).abs()", "score + slopes[h] * (q - kv).abs()", "wrong sign"),
    Mutant("ALiBi's slopes one head off", "attention_core/bends.py",
           "slopes = [2 ** (-8 * (i + 1) / closest) for i in range(closest)]",
           "slopes = [2 ** (-8 * i / closest) for i in range(closest)]", "wrong head"),
    Mutant("the soft cap without its c", "attention_core/bends.py",
           "lambda score, b, h, q, kv: cap * torch.tanh(score / cap)",
           "lambda score, b, h, q, kv: torch.tanh(score / cap)", "wrong formula"),
    Mutant("the relative bias read at the reversed distance", "attention_core/bends.py",
           "table[h, (q - kv).clamp(", "table[h, (kv - q).clamp(", "wrong sign"),
    Mutant("the bend left out of the mask and the softmax", "attention_core/engine.py",
           'masked_softmax(bent.get("bent_scores", scaled_scores), mask)', "masked_softmax(scaled_scores, mask)",
           "step left out"),
    Mutant("a decoding step bent as if at position 0", "attention_core/decoding.py",
           "torch.tensor([position], device=device), at)", "torch.tensor([0], device=device), at)", "wrong position"),
    # Since the last complete run (issue 62): the rest of composed.py, the bends' parser, /check's catalogue and
    # names, the bend's and the tiles' words and maps, the sweep's composed point, the notebook library, the chart's
    # numbering and chart.js, the document's sentences, Decoding's words and the slide bar's list.
    Mutant("a composition with an or of a causal piece taken as causal", "attention_core/composed.py",
           'return (any if self.op == "and" else all)(part.causal for part in self.parts)',
           'return (all if self.op == "and" else any)(part.causal for part in self.parts)', "mask composed"),
    Mutant("an and's cache the largest of its parts'", "attention_core/composed.py",
           'return min(held) if self.op == "and" else min(t, sum(held))',
           'return max(held) if self.op == "and" else min(t, sum(held))', "wrong cache size"),
    Mutant("an or inside an and written back without its parentheses", "attention_core/composed.py",
           'return f"({self.written()})" if outer == "and" and self.op == "or" else self.written()',
           "return self.written()", "false sentence"),
    Mutant("or binding tighter than and", "attention_core/composed.py",
           'return self.joined("or", "|", self.both)\n\n    def both(self) -> Mask:\n'
           '        return self.joined("and", "&", self.one)',
           'return self.joined("and", "&", self.both)\n\n    def both(self) -> Mask:\n'
           '        return self.joined("or", "|", self.one)', "mask composed"),
    Mutant("a soft cap of 0 taken", "attention_core/bends.py",
           "if not 0 < cap <= MAX_CAP:", "if not 0 <= cap <= MAX_CAP:", "bad input taken"),
    Mutant("/check's 'scaled by d_k' made with √d_k", "attention_core/checking/mistakes.py",
           'return _after_scores(trace, scaled=expected(trace)["scores"] / d_k)',
           'return _after_scores(trace, scaled=expected(trace)["scores"] / math.sqrt(d_k))', "false sentence"),
    Mutant("/check does not know TransformerLens's pattern", "attention_core/checking/stages.py",
           '"weights": ("weights", "attention_weights", "attn_weights", "pattern", "hook_pattern", "attn", "A"),',
           '"weights": ("weights", "attention_weights", "attn_weights", "hook_pattern", "attn", "A"),', "wrong name"),
    Mutant("ALiBi's farthest pair said one apart too far", "figures/stages/bent.py",
           "far = slope * (n - 1)", "far = slope * n", "false sentence"),
    Mutant("every head's tiles bent as head 1's", "figures/stages/tiles.py",
           "return lambda scores, rows, keys: mod(scores, 0, head, rows[:, None], keys[None, :])",
           "return lambda scores, rows, keys: mod(scores, 0, 0, rows[:, None], keys[None, :])", "wrong head"),
    Mutant("the tiles say they equal the ·V stage whatever their result", "figures/stages/tiles.py",
           "off = float((result - trace.context[head].double()).abs().max())", "off = 0.0", "false sentence"),
    Mutant("the skipped blocks counted as every block not full", "attention_core/models/sparse.py",
           "skipped = float((kinds == EMPTY).double().mean())", "skipped = float((kinds != FULL).double().mean())",
           "blocks", ("tests/test_app_real_model.py::"
                      "test_a_composed_mask_is_measured_on_smollm2_from_the_page_with_what_it_costs",)),
    Mutant("check(fn) never tells the student's fn the mask is causal", "attention_explorer/checking.py",
           'inputs["w_o"], made.heads, made.mask is not None', 'inputs["w_o"], made.heads, False',
           "wrong input"),
    Mutant("a chart's changed figure sent under its old number", "ui/live_chart/component.py",
           "if last is None or last[0] != spec:", "if last is None:", "order of figures"),
    Mutant("the chart's entries beside the session's counters", "ui/live_chart/component.py",
           'last = sent["charts"].get(key)\n    if last is None or last[0] != spec:\n        sent["count"] += 1\n'
           '        last = sent["charts"][key] = (spec, sent["count"])',
           'last = sent.get(key)\n    if not isinstance(last, tuple) or last[0] != spec:\n        sent["count"] += 1\n'
           '        last = sent[key] = (spec, sent["count"])', "order of figures"),
    Mutant("chart.js draws a figure older than the one it holds", "ui/live_chart/frontend/chart.js",
           "if (chart.sent?.session === order.session && order.number < chart.sent.number) return;",
           "if (false) return;", "order of figures",
           ("tests/test_browser_loop.py::test_a_chart_handed_an_older_figure_after_a_newer_one_keeps_the_newer",)),
    Mutant("chart.js draws in a half-repainted page's colours", "ui/live_chart/frontend/chart.js",
           "if (colours && !settledColours(colours)) {", "if (false) {", "unreadable",
           ("tests/test_browser_loop.py::test_no_chart_is_drawn_in_a_half_repainted_pages_colours",)),
    Mutant("a mark between two digits ends a sentence", "attention_core/composed.py",
           'and not (text[mark] == "." and text[mark - 1 : mark].isdigit() and after.isdigit())', "and True",
           "mask shifted"),
    Mutant("each mark of a run ends a sentence", "attention_core/composed.py",
           'if ends[i] and ends[i + 1] and bare(tokens[i + 1]).strip(SENTENCE_ENDS) == "":', "if False:",
           "mask shifted"),
    Mutant("the document's sentences said one fewer", "figures/stages/scores.py",
           "count = int(sentences(trace.tokens).max()) + 1", "count = int(sentences(trace.tokens).max())",
           "false sentence"),
    Mutant("Decoding says the causal mask under a composition", "app_pages/decoding/decoding.py",
           'return f"the composed mask ({parse_mask(composed_mask(config)).words()})"', 'return "the causal mask"',
           "false sentence"),
    Mutant("Compare's 'causal vs not' keeps the mask on its left side", "app_pages/compare/compare.py",
           'return {"causal": False, "mask": ""}, {"causal": True}, "Held fixed:',
           'return {"causal": True}, {"causal": True}, "Held fixed:', "wrong side"),
    Mutant("a deck's lost page switch is not asked again", "ui/decks.py",
           "if (going.switches == 0 or there != BY_TITLE[page].path) and going.switches < MAX_SWITCHES:",
           "if going.switches == 0:", "lost view"),
    Mutant("a deck's view takes the browser's old values", "ui/decks.py",
           "state[control.key] = _value(control, params[control.key])", "pass", "lost view"),
    Mutant("a timed part's stale run is run as the old page's", "ui/pages.py",
           "if here is not None and address.page_run() != here[0]:", "if False:", "lost view",
           ("tests/test_browser_class.py::"
            "test_a_timed_part_asked_for_by_the_page_before_a_switch_brings_back_the_page_switched_to",)),
    Mutant("→ stays in the slide list", "ui/keys.js",
           "const slideList = target?.matches(SLIDE_LIST) && !document.querySelector(OPEN);",
           "const slideList = false;", "trapped key",
           ("tests/test_browser.py::"
            "test_a_slide_chosen_from_the_bars_list_is_shown_and_the_arrow_keys_step_on_from_it",)),
    Mutant("a deck's first view's slide left out of its address", "ui/slides.py",
           "        keep_in_address(self.key, label, labels[0])\n", "", "lost view",
           ("tests/test_browser_effects.py::"
            "test_a_deck_view_that_does_not_name_a_choice_shows_its_default_going_back",)),
    Mutant("a press whose click was lost never sent again", "ui/keys.js",
           "    setTimeout(() => unanswered(count, selector, at), GIVE_UP_MS);\n", "", "lost click",
           ("tests/test_browser.py::test_a_press_whose_click_is_lost_or_whose_button_is_greyed_still_steps_once",)),
    Mutant("a press on a greyed button dropped", "ui/keys.js",
           "if (!button || (button.disabled && event.key === \"Escape\")) return;",
           "if (!button || button.disabled) return;", "lost click",
           ("tests/test_browser.py::test_a_press_whose_click_is_lost_or_whose_button_is_greyed_still_steps_once",)),
    Mutant("the slide pulled back over the reader's scroll", "ui/keys.js",
           "|| (element && left !== null && scrolledTo(element) !== left);  // the reader scrolled",
           ";", "lost click",
           ("tests/test_browser.py::"
            "test_the_arrow_keys_never_trap_esc_closes_only_what_is_open_and_leaving_returns_to_the_slide",)),
    Mutant("a freed heavy slot taken by a newcomer, not the first in line", "ui/traces.py",
           "            if self._line:\n                self._line.popleft().set()\n            else:\n"
           "                self._free += 1",
           "            self._free += 1\n            if self._line:\n                self._line.popleft().set()",
           "starved run"),
    Mutant("a deck's view showing an error put in its file", "app_pages/decks/export.py",
           "        if problems := _problems(at):", "        if (problems := _problems(at)) and False:",
           "error shown", ("tests/test_deck_file.py::test_a_view_showing_an_error_is_not_put_in_a_file",)),
    Mutant("a deck exported from the installed package, with no app", "attention_explorer/deck.py",
           'if not (APP_ROOT / "app.py").is_file() or not (APP_ROOT / "app_pages" / "decks" / "export.py").is_file():',
           "if False:",
           "missing check", ("tests/test_notebook.py::"
                             "test_the_library_installs_into_a_fresh_environment_and_imports_without_the_checkout",)),
    Mutant("a shipped deck's name taken for a file", "attention_explorer/deck.py",
           "if isinstance(deck, str) and deck in shipped:", "if False:", "wrong input",
           ("tests/test_deck_file.py::test_a_notebook_and_a_shell_export_a_deck_by_its_name_or_its_file",)),
    Mutant("a deck's view over the size limit written into its file", "app_pages/decks/export_html.py",
           "        if size > view_most:", "        if size > view_most * 1000:", "limit ignored",
           ("tests/test_deck_file.py::test_a_deck_that_cannot_be_exported_is_refused_by_name_and_nothing_is_left",)),
    Mutant("a V4 window that keeps W tokens, not W - 1", "attention_core/kv_cache.py",
           "    return min(n, s.window - 1) * s.d", "    return min(n, s.window) * s.d", "off by one",
           ("tests/test_kv_cache.py",)),
    Mutant("a CSA entry counted before its window closes", "attention_core/kv_cache.py",
           "    closed, waiting = divmod(n, s.m)", "    closed, waiting = -(-n // s.m), n % s.m", "early entry",
           ("tests/test_kv_cache.py",)),
    Mutant("V4's cache bar drawn at 1M tokens whatever the context", "figures/cache.py",
           "    values = [row.per_token_at(context) for row in rows]",
           '    values = [row.per_token_at(CONTEXTS["1M"]) for row in rows]', "wrong length",
           ("tests/test_claims.py",)),
    Mutant("a stale play switch's change taken for a press of play", "app_pages/training/views.py",
           "        if play == _play_key() and st.session_state.get(play)", "        if st.session_state.get(play)",
           "stale input", ("tests/test_app_training.py::"
                           "test_an_action_sent_before_the_page_saw_play_stop_does_not_play_again_from_step_0",)),
    Mutant("a worker whose server ended computes its waiting runs for no one", "attention_core/models/worker.py",
           "            pool.shutdown(wait=False, cancel_futures=True)\n            return",
           "            pool.shutdown(wait=True)\n            return", "orphaned work",
           ("tests/test_models_bundled.py::"
            "test_a_worker_whose_server_ends_drops_its_runs_instead_of_computing_them_for_no_one",)),
    Mutant("a long text's knob reruns the whole Real model page", "app_pages/real_model/real_model.py",
           'if slides.shows("long") and not settings.present:', 'if False:', "slow step",
           ("tests/test_browser_long.py::"
            "test_read_normally_the_region_the_distances_and_every_heads_numbers_are_drawn",)),
    Mutant("a region dragged on the overview cut one token long", "app_pages/real_model/long_text.py",
           "min(last, first + MOST_REGION - 1)", "min(last, first + MOST_REGION)", "off by one",
           ("tests/test_browser_long.py::"
            "test_read_normally_the_region_the_distances_and_every_heads_numbers_are_drawn",)),
    Mutant("a dragged box's last cell left out", "ui/live_chart/frontend/chart.js",
           "Math.ceil(Math.max(a, b) - 0.5)", "Math.floor(Math.max(a, b) - 0.5)", "off by one",
           ("tests/test_browser_long.py::"
            "test_read_normally_the_region_the_distances_and_every_heads_numbers_are_drawn",)),
    Mutant("a deck's view too large for its file drawn as large again", "ui/show.py",
           "dataclasses.replace(style, most_drawn=st.session_state[DRAWN_AT_MOST])", "style", "limit ignored"),
    Mutant("fewer cells a map re-pool a map pooled its own way", "figures/heatmap.py",
           "style.most_drawn if panel.drawn_most == MAX_DRAWN else panel.drawn_most",
           "min(style.most_drawn, panel.drawn_most)", "false title"),
    Mutant("a stopped server sweeps its memory before it ends", "ui/ending.py",
           "atexit.register(gc.freeze)", "atexit.register(gc.collect)", "slow stop"),
    Mutant("a worker's answer awaited by a pool's thread", "attention_core/models/worker.py",
           "        self._send(function, args).add_done_callback(lambda sent: settle(sent, 1))",
           "        sent = self._send(function, args)\n        ThreadPoolExecutor(1).submit(settle, sent, 1)",
           "slow stop",
           ("tests/test_models_bundled.py::"
            "test_a_server_waiting_for_the_workers_runs_ends_without_waiting_for_them",)),
    Mutant("a long text's pass awaited by a pool's thread", "app_pages/real_model/long_text.py",
           'future = model_worker().later("long", key, device, request, "read")',
           'future = __import__("concurrent.futures").futures.ThreadPoolExecutor(1).submit(model_worker().long, '
           'key, device, request, "read")', "slow stop",
           ("tests/test_deploy.py::test_a_stopped_server_ends_at_once_though_a_long_text_is_being_read",)),
    Mutant("a long text's keys past 2,048 lost", "attention_core/long_maps.py",
           "        k = self.k[layer][self.kv_head(head), :keys]  # [keys, d]",
           "        k = self.k[layer][self.kv_head(head), :keys]  # [keys, d]\n"
           "        k = torch.cat([k[:2048], torch.zeros_like(k[2048:])])", "length-only fault",
           ("tests/test_long.py::test_sampled_heads_recomputed_in_blocks_are_eagers_at_4096_tokens",)),
    Mutant("the sweep asked for 1,024 tokens measures 512", "attention_core/models/sparse.py",
           'running = {worker.later("sweep_point", key, device, *point, tokens): point for point in missing}',
           'running = {worker.later("sweep_point", key, device, *point, SWEEP_TOKENS): point for point in missing}',
           "length-only fault", ("tests/test_families.py::"
                                 "test_the_masks_sweep_at_a_longer_length_reads_that_many_tokens_and_refuses_one_over_the_context",)),
    Mutant("a kept sweep point read for a model written anew", "attention_core/models/kept.py",
           "what = [code_digest(), model_files(folder), where, mask, budget, tokens]",
           "what = [code_digest(), where, mask, budget, tokens]", "stale cache",
           ("tests/test_kept.py::test_a_point_is_kept_under_its_model_files_its_code_and_its_own_settings",)),
    Mutant("a kept sweep point cut short shown as it is", "attention_core/models/kept.py",
           "os.replace(part.name, path)  # whole or not at all: a reader never sees half a file",
           "os.replace(part.name, path); path.write_bytes(path.read_bytes()[:100])", "half-written file",
           ("tests/test_kept.py::test_a_point_kept_is_read_back_equal_and_a_file_cut_short_is_measured_again",)),
    Mutant("the page's own mask measured at 512 tokens whatever the length chosen",
           "app_pages/real_model/mask_sweep.py",
           "done[written] = model_worker().composed_point(key, device, written, tokens)",
           "done[written] = model_worker().composed_point(key, device, written, SWEEP_TOKENS)", "length-only fault",
           ("tests/test_app_real_model.py::"
            "test_a_composed_mask_is_measured_on_smollm2_from_the_page_with_what_it_costs",)),
    Mutant("a large map's grey outline one cell too wide", "figures/map_traces.py",
           "rows, left, right = starts[:, 0], starts[:, 1] - 0.5, stops - 0.5",
           "rows, left, right = starts[:, 0], starts[:, 1] - 0.5, stops + 0.5", "mask drawn wrongly",
           ("tests/test_figures.py",)),
)  # fmt: skip


def _first_failure(output: str) -> str:
    found = re.search(r"^FAILED (\S+)", output, re.MULTILINE) or re.search(r"^ERROR (\S+)", output, re.MULTILINE)
    return found.group(1) if found else ""


def tier_run(copy: Path, tier: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The mutant's tier on a copy of the repository, stopping at the first failure: the fast tier, or the test
    files named (with a browser: CI=true, so that none of them skips)."""
    chosen = list(tier) or ["-m", FAST_TIER, "tests"]
    # The house's checks that each mutant's line is still there, and where the report says, fail on every planted
    # copy: not a catch.
    for house in ("test_every_planted_mutant_still_finds_its_line",
                  "test_the_mutation_report_ran_on_every_mutant_where_its_line_is_now"):  # fmt: skip
        chosen += ["--deselect", f"tests/test_house.py::{house}"]
    return subprocess.run([str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-o", "addopts=-ra", *chosen], cwd=copy, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "CI": "true"}, timeout=1800)  # fmt: skip


def run(mutant: Mutant | None, tier: tuple[str, ...] = ()) -> dict:
    """The mutant's tier on a copy of the repository with this one mistake in it (None: with none, the baseline of
    `tier`)."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(ROOT, copy, ignore=COPY_IGNORED)
        if (ROOT / "node_modules").exists():  # npm's packages (axe-core, plotly.js), read where they are
            (copy / "node_modules").symlink_to(ROOT / "node_modules")
        if mutant is not None:
            target = copy / mutant.path
            text = target.read_text()
            if text.count(mutant.before) != 1:
                return {"mutant": mutant, "caught": None,
                        "by": f"the text to change occurs {text.count(mutant.before)}x"}  # fmt: skip
            target.write_text(text.replace(mutant.before, mutant.after))
        started = time.monotonic()
        done = tier_run(copy, mutant.tier if mutant else tier)
        seconds = time.monotonic() - started
        if mutant is None:
            return {"passed": done.returncode == 0, "seconds": seconds, "output": done.stdout[-3000:]}
        if done.returncode == 5:
            return {"mutant": mutant, "caught": None, "by": "no test collected", "seconds": seconds}
        caught = done.returncode != 0
        return {"mutant": mutant, "caught": caught, "by": _first_failure(done.stdout) if caught else "",
                "seconds": seconds}  # fmt: skip


def tier_name(tier: tuple[str, ...]) -> str:
    return "fast" if not tier else ", ".join(f"`{path}`" for path in tier)


def line_of(mutant: Mutant, root: Path = ROOT) -> int:
    """The line the mutant's change starts on, in the file as it is (0: not found). The report keeps it, and
    tests/test_house.py fails when it moved since: the row would then say what a run on other code caught."""
    text = (root / mutant.path).read_text() if (root / mutant.path).exists() else ""
    at = text.find(mutant.before)
    return text.count("\n", 0, at) + 1 if at >= 0 else 0


def run_on() -> str:
    """The commit a run plants its mutants in: HEAD, and "+" where the checkout has changes besides the report."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    changed = subprocess.run(["git", "status", "--porcelain", "--", ".", ":!docs/mutants.md"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()  # fmt: skip
    return (head.stdout.strip() or "unknown") + ("+" if changed else "")


def row(r: dict) -> str:
    m = r["mutant"]
    verdict = f"`{r['by']}`" if r["caught"] else ("**survived**" if r["caught"] is False else f"invalid: {r['by']}")
    where = f"`{m.path}:{line_of(m)}`"
    return (f"| {m.name} | {m.kind} | {where} | {tier_name(m.tier)} | {verdict} | {r.get('seconds', 0):.0f} "
            f"| {r.get('commit', '')} |")  # fmt: skip


def report(results: list[dict], kept: dict[str, str]) -> str:
    """The report: this run's rows, and `kept`, the earlier report's rows of the mutants not run this time (by
    name), so that a run of some (--only) updates theirs."""
    rows = {name: line for name, line in kept.items() if any(m.name == name for m in MUTANTS)}
    rows.update({r["mutant"].name: row(r) for r in results})
    ordered = [rows[m.name] for m in MUTANTS if m.name in rows]
    caught = sum(1 for line in ordered if line.split(" | ")[4].startswith("`"))  # its cell names the test
    return "\n".join([
        "# Mutation run: known bugs planted, and whether the tests of their tier catch them",
        "",
        "Made by `make mutants` (`scripts/mutants.py`): each mutant is one mistake planted in a copy of the",
        "repository, and the tests of its tier run on it, stopping at the first failure (on an unchanged copy first,",
        "which must pass). The tier is the fast one (`make check`: no browser, no model, no long run) unless a bug can",
        "only show in a browser or a real model; then the tests named, run with every marker and `CI=true` (none",
        "skips). A mutant that survives is a missing test. `scripts/mutants.py --only WORDS` runs some and updates",
        "their rows here. Each row says the line its change starts on and the commit it ran on (`+`: with changes not",
        "yet committed); `tests/test_house.py` fails when a mutant's line has moved since, until it is run again.",
        "",
        f"**{caught} of {len(ordered)} caught** ({caught / max(len(ordered), 1):.0%}).",
        "",
        "| mutant | kind | where | tier | caught by | seconds | commit |",
        "|---|---|---|---|---|---|---|",
        *ordered,
    ]) + "\n"  # fmt: skip


def kept_rows(path: Path) -> dict[str, str]:
    """An earlier report's rows, by mutant name."""
    if not path.exists():
        return {}
    rows = {}
    for line in path.read_text().splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) >= 6 and not line.startswith(("| mutant", "|---")):
            rows[cells[0][2:]] = line
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--only", nargs="*", help="run only the mutants whose names contain these words")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "mutants.md")
    arguments = parser.parse_args()
    chosen = [m for m in MUTANTS if not arguments.only or any(w in m.name for w in arguments.only)]
    for tier in sorted({m.tier for m in chosen}):  # a failure without a mutant would count as a catch
        baseline = run(None, tier)
        if not baseline["passed"]:
            sys.exit(f"the tier {tier_name(tier)} fails without any mutant; fix that first:\n{baseline['output']}")
        print(f"baseline: the tier {tier_name(tier)} passes ({baseline['seconds']:.0f} s)")
    commit = run_on()
    with concurrent.futures.ThreadPoolExecutor(arguments.jobs) as pool:
        results = [{**result, "commit": commit} for result in pool.map(run, chosen)]
    for r in results:
        state = "caught" if r["caught"] else "SURVIVED" if r["caught"] is False else "INVALID"
        print(f"{state:8} {r['mutant'].name}: {r['by']} ({r.get('seconds', 0):.0f} s)")
    arguments.report.write_text(report(results, kept_rows(arguments.report)))
    print(f"wrote {arguments.report}")
    if any(r["caught"] is None for r in results):
        sys.exit("a mutant's text to change was not found once: fix the list")


if __name__ == "__main__":
    main()
