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


MUTANTS = (
    Mutant("scale 1/d_k instead of 1/√d_k", "attention_core/engine.py",
           "scale = 1.0 / math.sqrt(projected.q.shape[-1]) if config.scaled else 1.0",
           "scale = 1.0 / projected.q.shape[-1] if config.scaled else 1.0", "wrong scale"),
    Mutant("softmax over the queries", "attention_core/engine.py",
           "return scaled_scores, torch.softmax(scaled_scores.to(softmax_dtype), dim=-1)",
           "return scaled_scores, torch.softmax(scaled_scores.to(softmax_dtype), dim=-2)", "wrong axis"),
    Mutant("masked softmax over the queries", "attention_core/engine.py",
           "weights = torch.softmax(masked_scores.to(softmax_dtype), dim=-1)",
           "weights = torch.softmax(masked_scores.to(softmax_dtype), dim=-2)", "wrong axis"),
    Mutant("causal mask shifted by one (a token hides itself)", "attention_core/engine.py",
           "return torch.ones(n, n, dtype=torch.bool, device=device).tril()",
           "return torch.ones(n, n, dtype=torch.bool, device=device).tril(-1)", "mask shifted"),
    Mutant("causal mask shifted by one (a token sees the next)", "attention_core/engine.py",
           "return torch.ones(n, n, dtype=torch.bool, device=device).tril()",
           "return torch.ones(n, n, dtype=torch.bool, device=device).tril(1)", "mask shifted"),
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
    Mutant("MLA's values up-projected with W_UK", "attention_core/variants/mla.py",
           'v_c = parts["c_kv"] @ w["w_uv"]  # [h, n, d_v]', 'v_c = parts["c_kv"] @ w["w_uk"]  # [h, n, d_v]',
           "wrong weight"),
    Mutant("absorbed scores without W_UK's transpose", "attention_core/variants/mla.py",
           'absorbed = parts["q_c"] @ weights["w_uk"].transpose(-2, -1)',
           'absorbed = parts["q_c"] @ weights["w_uk"].transpose(-2, -1).flip(-1)', "wrong fold"),
    Mutant("a decoding step one position late", "attention_core/decoding.py",
           "new = variant.project(x_new, params, config, position)",
           "new = variant.project(x_new, params, config, position + 1)", "position off by one"),
    Mutant("the cached step forgets the scale", "attention_core/decoding.py",
           "scale = 1.0 / math.sqrt(projected.q.shape[-1]) if config.scaled else 1.0", "scale = 1.0",
           "wrong scale"),
    Mutant("GQA's cache counts every query head", "attention_core/variants/grouped.py",
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
)  # fmt: skip


def _first_failure(output: str) -> str:
    found = re.search(r"^FAILED (\S+)", output, re.MULTILINE) or re.search(r"^ERROR (\S+)", output, re.MULTILINE)
    return found.group(1) if found else ""


def fast_tier(copy: Path) -> subprocess.CompletedProcess:
    """The fast tier on a copy of the repository, stopping at the first failure."""
    return subprocess.run([str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", FAST_TIER,
                           "-o", "addopts=-ra", "tests"], cwd=copy, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=1800)  # fmt: skip


def run(mutant: Mutant | None) -> dict:
    """The fast tier on a copy of the repository with this one mistake in it (None: with none, the baseline)."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
        copy = Path(scratch) / "repo"
        shutil.copytree(ROOT, copy, ignore=COPY_IGNORED)
        if mutant is not None:
            target = copy / mutant.path
            text = target.read_text()
            if text.count(mutant.before) != 1:
                return {"mutant": mutant, "caught": None,
                        "by": f"the text to change occurs {text.count(mutant.before)}x"}  # fmt: skip
            target.write_text(text.replace(mutant.before, mutant.after))
        started = time.monotonic()
        done = fast_tier(copy)
        seconds = time.monotonic() - started
        if mutant is None:
            return {"passed": done.returncode == 0, "seconds": seconds, "output": done.stdout[-3000:]}
        if done.returncode == 5:
            return {"mutant": mutant, "caught": None, "by": "no test collected", "seconds": seconds}
        caught = done.returncode != 0
        return {"mutant": mutant, "caught": caught, "by": _first_failure(done.stdout) if caught else "",
                "seconds": seconds}  # fmt: skip


def report(results: list[dict]) -> str:
    caught = sum(1 for r in results if r["caught"])
    lines = [
        "# Mutation run: known bugs planted, and whether the fast tests catch them",
        "",
        "Made by `make mutants` (`scripts/mutants.py`): each mutant is one mistake planted in a copy of the",
        "repository, and the fast tier (`make check`: no browser, no model, no long run) runs on it, stopping at the",
        "first failure (on an unchanged copy first, which must pass). A mutant that survives is a missing test.",
        "",
        f"**{caught} of {len(results)} caught** ({caught / len(results):.0%}).",
        "",
        "| mutant | kind | where | caught by | seconds |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        m = r["mutant"]
        verdict = f"`{r['by']}`" if r["caught"] else ("**survived**" if r["caught"] is False else f"invalid: {r['by']}")
        lines.append(f"| {m.name} | {m.kind} | `{m.path}` | {verdict} | {r.get('seconds', 0):.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--only", nargs="*", help="run only the mutants whose names contain these words")
    parser.add_argument("--report", type=Path, default=ROOT / "docs" / "mutants.md")
    arguments = parser.parse_args()
    chosen = [m for m in MUTANTS if not arguments.only or any(w in m.name for w in arguments.only)]
    baseline = run(None)  # a failure without a mutant would be counted as a catch: the tier must pass first
    if not baseline["passed"]:
        sys.exit(f"the fast tier fails without any mutant; fix that first:\n{baseline['output']}")
    print(f"baseline: the fast tier passes ({baseline['seconds']:.0f} s)")
    with concurrent.futures.ThreadPoolExecutor(arguments.jobs) as pool:
        results = list(pool.map(run, chosen))
    for r in results:
        state = "caught" if r["caught"] else "SURVIVED" if r["caught"] is False else "INVALID"
        print(f"{state:8} {r['mutant'].name}: {r['by']} ({r.get('seconds', 0):.0f} s)")
    if not arguments.only:
        arguments.report.write_text(report(results))
        print(f"wrote {arguments.report}")
    if any(r["caught"] is None for r in results):
        sys.exit("a mutant's text to change was not found once: fix the list")


if __name__ == "__main__":
    main()
