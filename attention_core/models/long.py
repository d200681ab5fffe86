"""Long texts on a real model (up to MAX_LONG_TOKENS of SmolLM2): one forward pass that keeps each layer's queries
and keys as they meet (after RoPE), never an n×n map (capture.capture_attention's long path runs PyTorch's SDPA,
which writes none either). What is read from them is attention_core/long_maps.py's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import torch

from attention_core.config import check_text
from attention_core.limits import MAX_LONG_TEXT_CHARS
from attention_core.long_maps import LongTrace
from attention_core.models.capture import TOKENIZING, readable_token
from attention_core.models.kinds import LoadedModel, ModelInfo
from attention_core.models.needle import NEEDLE, QUESTION, Placed, place

MAX_LONG_TOKENS = 4096
LENGTHS = (256, 512, 1024, 2048, 4096)  # the lengths a reader picks from (each at most the model's own context)
ANSWER_TOKENS = 8  # what a decoder writes after the needle's question (greedy)
TEXT_FILE = Path(__file__).resolve().parents[1] / "data" / "long-text.txt"  # scripts/sweep_text.py writes it


def long_text() -> str:
    """The long text offered: the user guide's prose (scripts/sweep_text.py), the project's own words."""
    return TEXT_FILE.read_text(encoding="utf-8")


@dataclasses.dataclass(frozen=True)
class LongRequest:
    """What a reader asks to read: a text (up to MAX_LONG_TEXT_CHARS), at most `tokens` of it, and optionally a
    needle placed at `depth` (0 … 1) with its question at the end (needle.py). Equal requests read the same."""

    text: str
    tokens: int
    needle: str = ""
    question: str = ""
    depth: float = 0.5

    def __post_init__(self):
        check_text(self.text, "the long text", MAX_LONG_TEXT_CHARS)
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or not 1 <= self.tokens <= MAX_LONG_TOKENS:
            raise ValueError(f"tokens must be a whole number from 1 to {MAX_LONG_TOKENS:,}; got {self.tokens!r}")
        for field in ("needle", "question"):
            check_text(getattr(self, field), f"the {field}", 1000)


@dataclasses.dataclass(frozen=True)
class LongRead:
    """A long text read, as the server sees it: its tokens and what the pass found, without the q and k (which
    stay where they were computed). answer: what a decoder wrote after it (greedy; () without a needle)."""

    tokens: tuple[str, ...]
    total_tokens: int
    n_layers: int
    heads: int
    kv_heads: int
    causal: bool
    kept_bytes: int
    seconds: float
    placed: Placed | None = None
    answer: str = ""

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


def pass_cost(info: ModelInfo, parameters: int, n: int) -> float:
    """A pass's multiply-adds, roughly: every weight once per token, and each causal row's q·k and w·v over the
    keys before it (n²/2 of each per head and layer)."""
    return parameters * n + info.n_layers * info.heads * info.d_k * n * n


def kept_bytes(info: ModelInfo, n: int) -> int:
    """What a long text's pass keeps: every layer's q [h, n, d_k] and k [g, n, d_k] in float32."""
    return info.n_layers * (info.heads + info.n_kv_heads) * n * info.d_k * 4


def long_cap(loaded: LoadedModel) -> int:
    """The most tokens a long text keeps on this model: MAX_LONG_TOKENS, or the model's own context if shorter."""
    return min(MAX_LONG_TOKENS, loaded.info.max_positions)


def trace_long(loaded: LoadedModel, text: str, progress: Callable[[float], None] = lambda done: None) -> LongTrace:
    """Tokenize text as the model does, cut it to long_cap, and run the model once, keeping every layer's q and k.
    `progress` hears the share of the layers done after each one."""
    return read_long(loaded, LongRequest(text, MAX_LONG_TOKENS), progress)[0]


def trace_long_ids(
    loaded: LoadedModel, ids: list[int], total: int | None = None, progress: Callable[[float], None] = lambda done: None
) -> LongTrace:
    """trace_long of token ids (at most long_cap of them); `total`: how many the text had before it was cut."""
    if not 1 <= len(ids) <= long_cap(loaded):
        raise ValueError(f"a long text has 1 to {long_cap(loaded):,} tokens on {loaded.info.title}; got {len(ids):,}")
    kept: list[dict] = []
    layers = loaded.model.config.num_hidden_layers
    device = next(loaded.model.parameters()).device
    with torch.inference_mode():
        loaded.model(
            input_ids=torch.tensor([ids], device=device),
            keep_qk=kept,
            use_cache=False,
            long_progress=lambda done: progress(done / layers),
        )
    return _trace_of(loaded, ids, kept, len(ids) if total is None else total)


def _trace_of(loaded: LoadedModel, ids: list[int], kept: list[dict], total: int) -> LongTrace:
    """The LongTrace of a pass that kept `kept`, one entry per layer."""
    layers = loaded.model.config.num_hidden_layers
    if len(kept) != layers:
        raise ValueError(f"kept {len(kept)} attention layers of {layers}: this family's attention is not read")
    with TOKENIZING:
        tokens = tuple(readable_token(loaded.tokenizer, raw) for raw in loaded.tokenizer.convert_ids_to_tokens(ids))
    return LongTrace(
        tokens, tuple(e["q"] for e in kept), tuple(e["k"] for e in kept), kept[0]["scale"], kept[0]["causal"], total
    )


def read_long(loaded: LoadedModel, request: LongRequest, progress: Callable[[float], None] = lambda done: None):
    """A request read: (its LongTrace, its LongRead). With a needle, the needle is placed in the text and, on a
    decoder, the model writes ANSWER_TOKENS after the question from the same pass's cache (greedy)."""
    started = time.perf_counter()
    cap = min(request.tokens, long_cap(loaded))
    placed, answer = None, ""
    if request.needle:
        with TOKENIZING:
            placed = place(
                loaded.tokenizer,
                request.text,
                request.needle or NEEDLE,
                request.question or QUESTION,
                request.depth,
                cap,
            )
        trace, answer = _with_answer(loaded, placed.ids, progress)
    else:
        with TOKENIZING:
            ids = loaded.tokenizer(request.text, verbose=False)["input_ids"]  # counted, then cut: no warning
        if not ids:
            raise ValueError(f"the long text gives no tokens for {loaded.info.title}; type or choose a text")
        total = len(ids)
        if total > cap:
            with TOKENIZING:
                ids = loaded.tokenizer(request.text, truncation=True, max_length=cap)["input_ids"]
        trace = trace_long_ids(loaded, ids, total, progress)
    read = LongRead(
        trace.tokens,
        trace.total_tokens,
        trace.n_layers,
        trace.heads,
        trace.k[0].shape[0],
        trace.causal,
        trace.kept_bytes,
        time.perf_counter() - started,
        placed,
        answer,
    )
    return trace, read


def _with_answer(loaded: LoadedModel, ids: list[int], progress) -> tuple[LongTrace, str]:
    """trace_long_ids of the ids and, on a decoder, the ANSWER_TOKENS it writes next from the pass's own cache."""
    if loaded.lm is None:
        return trace_long_ids(loaded, ids, None, progress), ""
    kept: list[dict] = []
    device = next(loaded.lm.parameters()).device
    written: list[int] = []
    layers = loaded.lm.config.num_hidden_layers
    ends = loaded.lm.generation_config.eos_token_id
    ends = set(ends if isinstance(ends, list) else [] if ends is None else [ends])
    with torch.inference_mode():
        out = loaded.lm(
            input_ids=torch.tensor([ids], device=device),
            keep_qk=kept,
            use_cache=True,
            logits_to_keep=1,
            long_progress=lambda done: progress(done / layers),
        )
        for _ in range(ANSWER_TOKENS):
            next_id = int(out.logits[0, -1].argmax())
            if next_id in ends:
                break
            written.append(next_id)
            out = loaded.lm(
                input_ids=torch.tensor([[next_id]], device=device),
                past_key_values=out.past_key_values,
                use_cache=True,
                logits_to_keep=1,
                keep_qk=[],
            )
    trace = _trace_of(loaded, ids, kept, len(ids))
    with TOKENIZING:
        return trace, loaded.tokenizer.decode(written)
