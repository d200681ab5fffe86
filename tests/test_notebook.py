"""The notebook API (attention_explorer): the app's numbers and figures for the same settings, the link that opens
the same view, and check(fn) judging a student's attention written here in numpy, its mistakes planted one at a
time, and every kind of bad answer named with its case."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

import attention_explorer as ax
from attention_core import trace_sentence
from attention_explorer.checking import Case
from figures.settings import DEFAULTS as SIDEBAR
from tests.numerics import F32, gamma
from tests.test_app import ROOT, TIMEOUT, charts, no_problems
from ui.sidebar import settings_from


def student(x, w_q, w_k, w_v, w_o, heads, causal, *, scale="d_k", axis=-1, hide_self=False, fill="-inf",
            concat="heads in order", stages=False):  # fmt: skip
    """Multi-head attention as a student writes it in numpy, from the lecture's formulas (not from this app's code):
    the planted mistakes are switches. stages: the weights alone ("weights") or every stage (True)."""
    n, d_k = x.shape[0], w_q.shape[1] // heads
    kv_heads = w_k.shape[1] // d_k

    def split(m, h):  # [n, h·d] -> [h, n, d]
        return m.reshape(n, h, -1).transpose(1, 0, 2)

    q, k, v = split(x @ w_q, heads), split(x @ w_k, kv_heads), split(x @ w_v, kv_heads)
    k, v = np.repeat(k, heads // kv_heads, axis=0), np.repeat(v, heads // kv_heads, axis=0)  # 1 1 2 2
    scores = q @ k.transpose(0, 2, 1)
    scaled = scores / np.sqrt({"d_k": d_k, "d_model": x.shape[1], None: 1}[scale])
    if causal:
        hidden = np.triu(np.ones((n, n), dtype=bool), k=0 if hide_self else 1)
        scaled = np.where(hidden, {"-inf": -np.inf, "-1e9": -1e9, "nan_to_num": -np.inf, "0": 0.0}[fill], scaled)
    with np.errstate(invalid="ignore"):  # a row whose every key is hidden: NaN, as the student's numpy makes it
        e = np.exp(scaled - scaled.max(axis=axis, keepdims=True))
        weights = e / e.sum(axis=axis, keepdims=True)
    weights = np.nan_to_num(weights) if fill == "nan_to_num" else weights
    context = weights @ v
    joined = context.transpose(1, 0, 2) if concat == "heads in order" else context  # wrong: [h, n, d] as it is
    output = joined.reshape(n, -1) @ w_o
    if stages == "weights":
        return {"weights": weights}
    return {"scores": scores, "weights": weights, "context": context, "output": output} if stages else output


def test_the_notebooks_defaults_are_the_sidebars_and_its_trace_is_the_apps():
    assert {name: SIDEBAR[name] for name in ax.DEFAULTS} == ax.DEFAULTS
    mla = {"variant": "mla", "heads": 2, "positional": "rotary"}
    for settings in ({}, {"heads": 2, "causal": True, "d_k": 3}, mla):
        ours = ax.trace("the cat saw the dog", **settings)
        app = trace_sentence("the cat saw the dog", settings_from({**settings, "text": "the cat saw the dog"}).config)
        for stage in ("q", "k", "v", "scores", "weights", "context", "output"):
            torch.testing.assert_close(getattr(ours, stage), getattr(app, stage), rtol=0, atol=0)


def test_a_setting_the_sidebar_does_not_have_or_cannot_take_is_named():
    with pytest.raises(ValueError, match="unknown setting 'num_heads'"):  # transformers' name; ours is heads
        ax.trace("a b", num_heads=2)
    with pytest.raises(ValueError, match="d_k"):
        ax.trace("a b", d_k=0)
    with pytest.raises(ValueError, match="text must be text"):
        ax.trace(42)


def test_show_returns_the_walkthroughs_stages_with_the_apps_figures():
    shown = ax.show("the cat saw the dog", heads=2, causal=True, display=False)
    keys = [stage.key for stage in shown]
    assert keys[0] == "x" and "weights" in keys and keys[-1] in ("output", "cache", "tiles")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"text": "the cat saw the dog", "heads": "2", "causal": "true"})
    at.run()
    no_problems(at)
    app = {json_z(spec) for spec in charts(at) if json_z(spec)}
    weights = next(stage for stage in shown if stage.key == "weights")
    mine = {json_z(figure.to_plotly_json()) for figure in weights.figures} - {None}
    assert mine and mine <= app  # the weights' maps hold the app's numbers
    with pytest.raises(ValueError, match="stage 'nope' is not shown"):
        ax.show("a b", stages=["nope"], display=False)


def json_z(spec) -> tuple | None:
    """A figure's first heatmap's numbers (a plotly.js typed array decoded), to 5 decimals, as a comparable value."""
    for trace in spec.get("data", []):
        if trace.get("type") == "heatmap" and trace.get("z") is not None:
            z = trace["z"]
            if isinstance(z, dict):
                z = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"])
            values = np.round(np.asarray(z, dtype=float), 5).ravel()
            return tuple(None if np.isnan(value) else float(value) for value in values)  # a masked cell: None
    return None


def test_the_link_opens_the_same_view_in_the_app():
    made = ax.trace("the cat saw the dog", heads=2, causal=True, d_k=3, seed=7)
    address = ax.link(made)
    assert address.startswith("http://localhost:8501/?")
    params = dict(parse_qsl(urlsplit(address).query))
    assert params == {"text": "the cat saw the dog", "heads": "2", "causal": "true", "d_k": "3", "seed": "7"}
    app = trace_sentence(params["text"], settings_from({**SIDEBAR, **coerce(params)}).config)
    torch.testing.assert_close(app.output, made.output, rtol=0, atol=0)
    assert ax.link({}) == "http://localhost:8501/"
    with pytest.raises(ValueError, match="attention_explorer.trace"):
        ax.link(trace_sentence("a b", settings_from({}).config))


def coerce(params: dict[str, str]) -> dict[str, object]:
    return {k: (v == "true") if v in ("true", "false") else int(v) if v.lstrip("-").isdigit() else v
            for k, v in params.items()}  # fmt: skip


def test_a_right_attention_is_right_in_every_case_and_for_every_grouped_variant():
    for variant in ("mha", "gqa", "mqa"):
        result = ax.check(student, variant=variant)
        assert result.all_right, result
        assert result.first_wrong is None and result.mistakes == ()
        assert len(result.cases) == 5 and str(result).startswith("All right")
    staged = ax.check(lambda *a: student(*a, stages=True))
    assert staged.all_right, staged
    assert [c.stage for c in staged.cases[0].verdict.checked] == ["scores", "weights", "context", "output"]


@pytest.mark.parametrize(
    ("planted", "first", "named"),
    [
        ({"scale": None}, "scores", "no scaling by √d_k"),
        ({"axis": -2}, "weights", "softmax over the wrong axis"),
        ({"hide_self": True}, "weights", "causal mask shifted by one: a token cannot see itself"),
    ],
)
def test_a_planted_mistake_is_found_at_its_stage_and_named(planted, first, named):
    result = ax.check(lambda *a: student(*a, stages=True, **planted))
    assert not result.all_right
    if first == "scores":  # no scaling: the scores are right, the weights are not
        first = "weights"
    assert result.first_wrong == first, result
    assert named in result.mistakes, result
    assert named in str(result) and "✗" in str(result)


@pytest.mark.parametrize("fill", ["-inf", "-1e9", "nan_to_num"])
@pytest.mark.parametrize("handed", ["weights", "output"])
def test_a_mask_that_hides_the_diagonal_is_named_however_the_student_filled_it(fill, handed):
    """triu(diagonal=0): the first token has no key left. Its row is NaN (−∞), spread evenly over every key (−1e9)
    or zeros (nan_to_num): named in each, from the weights alone or from the output alone."""
    result = ax.check(
        lambda *a: student(*a, hide_self=True, fill=fill, stages="weights" if handed == "weights" else False)
    )
    assert result.first_failed.case.name == "small, causal"
    assert result.first_wrong == handed
    assert result.mistakes == ("causal mask shifted by one: a token cannot see itself",), result


@pytest.mark.parametrize(
    ("planted", "first"),
    [({"fill": "0"}, "weights"), ({"scale": "d_model"}, "weights"), ({"concat": "heads as they come"}, "output")],
    ids=["masked with 0", "scaled by √d_model", "heads concatenated out of order"],
)
def test_a_mistake_outside_the_catalogue_is_located_and_never_misnamed(planted, first):
    result = ax.check(lambda *a: student(*a, stages=True, **planted))
    assert result.first_wrong == first, result
    assert result.mistakes == (), result
    assert "no mistake this check knows gives these numbers" in str(result)


def test_every_bad_answer_is_named_with_its_case():
    cases = [Case("tiny", "a b c", {"d_model": 4, "d_k": 2, "d_v": 2, "heads": 2})]
    said = {
        "raises": str(ax.check(lambda *a: 1 / 0, cases=cases)),
        "a list": str(ax.check(lambda *a: [[0.0]], cases=cases)),
        "a shape": str(ax.check(lambda *a: np.zeros((2, 2)), cases=cases)),
        "NaN": str(ax.check(lambda *a: student(*a) * np.nan, cases=cases)),
        "arguments": str(ax.check(lambda x: x, cases=cases)),
    }
    assert "✗ tiny: your function raised ZeroDivisionError" in said["raises"]
    assert "✗ tiny: your function returned a list; expected the output, an array [3, 4]" in said["a list"]
    assert "✗ tiny: output should be [n, width] with n = 3; got [2, 2]" in said["a shape"]
    assert "✗ tiny: output is the first stage that differs (NaN at [0, 0])" in said["NaN"]
    assert "✗ tiny: your function raised TypeError" in said["arguments"]
    with pytest.raises(ValueError, match="variant must be one of mha, gqa, mqa; got 'mla'"):
        ax.check(student, variant="mla")


NOTEBOOK = ROOT / "docs" / "notebooks" / "attention-in-a-notebook.ipynb"


@pytest.fixture(scope="session")  # session: a worker that comes back to this module after another keeps it
def installed(tmp_path_factory) -> dict[str, Path]:
    """`pip install .` as a student runs it: the checkout (a copy: a build writes build/ and egg-info beside it)
    installed with its notebook extra into a fresh virtual environment, every dependency pyproject.toml declares
    resolved by pip from the registry's wheels (no .pth lending this environment's), at the versions the app pins
    (requirements.txt as constraints: on these machines an unpinned torch resolves to a 5.8 GB CUDA build), with
    ipykernel for a kernel of its own. Without pip's byte-compiling of every module it installs (a quarter of the
    install's CPU time): Python compiles the ones the kernel imports as it imports them. Its python, its
    site-packages, its kernel's folder and a working directory outside the checkout."""
    import venv

    root = tmp_path_factory.mktemp("installed")
    source, fresh, elsewhere = root / "checkout", root / "venv", root / "work"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".*", "node_modules", "test-artifacts", "__pycache__"))
    venv.EnvBuilder(with_pip=True).create(fresh)
    elsewhere.mkdir()
    python = fresh / "bin" / "python"
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", "-c", str(ROOT / "requirements.txt"),
                           f"{source}[notebook]", "ipykernel"],
                          cwd=elsewhere, env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    assert all((site / package).is_dir() for package in ("torch", "transformers", "plotly", "safetensors", "numpy"))
    kernels = root / "jupyter"
    subprocess.run([python, "-m", "ipykernel", "install", "--prefix", str(kernels), "--name", "installed"],
                   check=True, cwd=elsewhere, env=env, capture_output=True)  # fmt: skip
    return {"python": python, "site": site, "kernels": kernels / "share" / "jupyter", "elsewhere": elsewhere}


@pytest.mark.slow
@pytest.mark.models
@pytest.mark.xdist_group("installed")
def test_the_notebook_runs_in_a_real_kernel_and_says_what_it_should(installed, smollm2, monkeypatch):
    """docs/notebooks' student path, executed cell by cell by a Jupyter kernel (nbclient, ipykernel) of the fresh
    environment the package was pip-installed into, in a folder outside the checkout: its own asserts hold (the check
    right, the figure's numbers the trace's), its outputs say what they should, and what it imported is the
    installed copy. (smollm2: the bundled model converted once for the run, which the notebook's last cell reads.)"""
    import nbclient
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(
        "import attention_core, attention_explorer, figures\n"
        "print(attention_explorer.__file__, attention_core.__file__, figures.__file__)"))  # fmt: skip
    monkeypatch.setenv("JUPYTER_PATH", str(installed["kernels"]))  # where the kernel "installed" is found
    monkeypatch.delenv("PYTHONPATH", raising=False)
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="installed",
                                     resources={"metadata": {"path": str(installed["elsewhere"])}})  # fmt: skip
    client.execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]

    def printed(starts: str) -> str:
        cell = next(cell for cell in code if cell.source.startswith(starts))
        return "".join(out.get("text", "") for out in cell.outputs if out.get("name") == "stdout")

    checked = printed("import attention_explorer as ax")
    assert checked.startswith("All right in every case.") and checked.count("✓") == 5, checked
    wrong = printed("def over_the_queries")
    assert wrong.startswith("weights (") and "softmax over the wrong axis" in wrong, wrong
    assert printed("print(ax.link").strip().startswith("http://localhost:8501/?text=the+cat+saw+the+dog")
    assert printed("import transformers\n").startswith("30 layers; 9 heads; head 1 of layer 3:")
    shown = next(cell for cell in code if cell.source.startswith("trace = ax.trace"))
    assert any("application/vnd.plotly.v1+json" in out.get("data", {}) for out in shown.outputs), "no figure drawn"
    files = printed("import attention_core, attention_explorer").split()
    assert len(files) == 3 and all(f.startswith(str(installed["site"])) for f in files), files  # not the checkout


@pytest.mark.slow
@pytest.mark.xdist_group("installed")
def test_the_library_installs_into_a_fresh_environment_and_imports_without_the_checkout(installed):
    """The package installed with its declared dependencies (the fixture): its data is there, the app's pages are not,
    and a script run elsewhere traces, shows and checks from the installed copy without Streamlit; a deck is not
    exported from it (that runs the app), and it says so."""
    site = installed["site"]
    assert (site / "attention_core" / "data" / "lecture-002.safetensors").is_file()
    assert (site / "attention_explorer").is_dir() and not (site / "ui").exists() and not (site / "app_pages").exists()
    script = (
        "import sys, attention_explorer as ax\n"
        "t = ax.trace('a b c', heads=2)\n"
        "assert ax.show(t, display=False) and ax.check(lambda x, *w: None).cases\n"
        "try: ax.export_deck('lecture-000', 'deck.html')\n"  # the app is not installed: said, nothing written
        "except ax.deck.NoApp as no: assert 'the installed package holds the library alone' in str(no), no\n"
        "else: raise SystemExit('a deck exported without the app')\n"
        "import os; assert not os.path.exists('deck.html')\n"
        "assert 'streamlit' not in sys.modules, 'imported streamlit'\n"
        "print(ax.__file__)\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([installed["python"], "-c", script], cwd=installed["elsewhere"], env=env,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(site)), done.stdout  # the installed copy, not the checkout


@pytest.mark.models
@pytest.mark.xdist_group("models")
@pytest.mark.parametrize("which", ["smollm2", "minilm"])
def test_show_model_reads_a_model_in_memory_whose_weights_are_its_own_eager_attentions(which, request):
    """A transformers model loaded in the notebook (here the bundled files, loaded by transformers itself with its
    eager attention): every layer's weights are the ones its own eager attention returns, the heads' grid and the
    chosen head's stages come back, and the model is left with the attention it had."""
    import transformers

    bundled = request.getfixturevalue(which)
    kind = transformers.AutoModelForCausalLM if which == "smollm2" else transformers.AutoModel
    model = kind.from_pretrained(bundled.model.name_or_path, dtype=torch.float32, attn_implementation="eager")
    text = "the cat saw the dog"
    shown = ax.show_model(model, bundled.tokenizer, text, layer=2, head=2, display=False)
    assert model.config._attn_implementation == "eager"
    ids = bundled.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        stock = model(input_ids=ids, output_attentions=True).attentions  # eager's own weights, [1, h, n, n] a layer
    assert len(shown.trace.layers) == len(stock) == model.config.num_hidden_layers
    for ours, theirs in zip(shown.trace.layers, stock, strict=True):
        # The same softmax of the same scores, each weight off by float32's rounding of its row's sum at most.
        torch.testing.assert_close(ours.weights.float(), theirs[0], rtol=0, atol=gamma(ids.shape[1] + 2, F32))
    weights = next(stage for stage in shown.stages if stage.key == "weights")  # layer 2, head 2
    drawn = np.nan_to_num(np.asarray(weights.figures[0].data[0].z, dtype=float))
    # The figure carries the trace's own float32 weights (as float32: no rounding between), hidden cells as gaps.
    assert np.array_equal(drawn, shown.trace.layers[1].weights[1].float().double().numpy())
    assert shown.grid.data and shown.grid.data[0].type == "heatmap"
    with pytest.raises(ValueError, match="layer must be between 1 and"):
        ax.show_model(model, bundled.tokenizer, text, layer=99, display=False)


def test_the_results_html_view_says_what_its_text_says():
    """Jupyter shows a result by its HTML: the same lines as str(), escaped, each case once."""
    cases = [Case("a <b>tiny</b> one", "a b c", {"d_model": 4, "d_k": 2, "d_v": 2, "heads": 2, "causal": True})]
    right, wrong = (
        ax.check(student, cases=cases),
        ax.check(lambda *a: student(*a, scale=None, stages=True), cases=cases),
    )
    assert "<b>All right</b>" in right._repr_html_() and "✓ a &lt;b&gt;tiny&lt;/b&gt; one" in right._repr_html_()
    html_view = wrong._repr_html_()
    assert "<b>Not right yet</b>" in html_view and html_view.count("<li>") == 1
    assert "no scaling by √d_k" in html_view and "<b>tiny</b>" not in html_view  # the case's name escaped
    first = next(c for c in wrong.cases[0].verdict.checked if not c.ok)
    assert f"by up to {first.difference:.3g}" in str(wrong)  # the number said is the difference measured
