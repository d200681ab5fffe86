"""A real decoder writing, one token at a time, with its own KV cache: greedy generation that keeps
every step's attention rows, every layer and head, through the same capture as the Real model page.

    prefill   the prompt's p tokens in one forward pass; transformers' DynamicCache keeps every layer's K and V
    step      the last token alone goes in, with the cache; each layer's attention reads the new query against
              the p + s cached keys (its own included); the most probable next token is appended (greedy)

What the capture records at a step is one query row per head, [heads, 1, t]: the new token's attention over every
token so far. tests/test_generation.py checks each step's row and logits against a full forward pass over the
same tokens without a cache, and the tokens against `model.generate(do_sample=False)`.

A generation runs step by step, each step one request to the model worker (worker.py), so that the page can show
progress and stop between steps: the worker keeps each generation's cache (`Generations`) until it ends.
"""

from __future__ import annotations

import collections
import dataclasses
import threading

import torch
from transformers import DynamicCache

from attention_core.limits import MAX_MODEL_TOKENS
from attention_core.models.capture import TOKENIZING, attention_entries, readable_token

MAX_NEW_TOKENS = 32
TOP = 5  # next-token probabilities shown


@dataclasses.dataclass(frozen=True)
class Position:
    """One token of a generation, prompt or generated. rows [layers, heads, t]: its attention row over tokens
    1 … t (itself the last), every layer and head; top: the TOP most probable next tokens after it, (token,
    probability); cached: the positions the cache holds once this token is in."""

    token: str
    token_id: int
    generated: bool
    rows: torch.Tensor
    top: tuple[tuple[str, float], ...]
    cached: int


@dataclasses.dataclass(frozen=True)
class Generation:
    """A prompt and what the model wrote after it: `positions`, prompt first. cache_bytes_per_position: what the
    model's cache keeps per token, all layers: layers × kv heads × 2 (K and V) × d_k × bytes per number."""

    positions: tuple[Position, ...]
    prompt: int
    asked: int  # new tokens asked for
    ended: bool  # the model wrote its end-of-text token
    cache_bytes_per_position: int

    @property
    def written(self) -> int:
        """New tokens written so far."""
        return len(self.positions) - self.prompt

    @property
    def new_ids(self) -> tuple[int, ...]:
        return tuple(p.token_id for p in self.positions[self.prompt :])

    @property
    def done(self) -> bool:
        return self.ended or self.written >= self.asked

    def plus(self, position: Position, ended: bool) -> Generation:
        """This generation with one more token; ended: the token is the model's end of text."""
        return dataclasses.replace(self, positions=(*self.positions, position), ended=ended)


def _end_ids(model) -> set[int]:
    end = model.generation_config.eos_token_id
    return set(end if isinstance(end, list) else [] if end is None else [end])


def _top(tokenizer, logits: torch.Tensor) -> tuple[tuple[str, float], ...]:
    probabilities = torch.softmax(logits.float(), dim=-1)
    values, ids = probabilities.topk(TOP)
    return tuple(
        (readable_token(tokenizer, tokenizer.convert_ids_to_tokens(int(i))), float(v))
        for v, i in zip(values, ids, strict=True)
    )


def _cache_bytes_per_position(config, cache: DynamicCache) -> int:
    """Keys and values of every layer for one token (MLA as transformers runs it caches whole keys, d_h + d_h^R
    wide, and values, d_v wide, per head: not the latent)."""
    layer = cache.layers[0]
    _, kv_heads, _, d_k = layer.keys.shape
    return config.num_hidden_layers * kv_heads * (d_k + layer.values.shape[-1]) * layer.keys.element_size()


def _over_every_token(rows: torch.Tensor, t: int) -> torch.Tensor:
    """[heads, held] -> [heads, t]: a sliding window's layer holds only its last `held` keys (Mistral, Gemma 2);
    the tokens before them get weight 0, which is what its mask gives them."""
    return torch.nn.functional.pad(rows, (t - rows.shape[-1], 0))


@dataclasses.dataclass
class _Running:
    generation: Generation
    cache: DynamicCache
    next_id: int
    logits: torch.Tensor  # the last step's next-token logits [vocabulary] (tests compare them)


def check_generation(prompt_tokens: int, new_tokens: int) -> None:
    """Refuse a prompt over the cap or a count of new tokens out of range, naming the value and what is allowed."""
    if isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or not 1 <= new_tokens <= MAX_NEW_TOKENS:
        raise ValueError(f"new tokens must be a whole number from 1 to {MAX_NEW_TOKENS}; got {new_tokens!r}")
    if prompt_tokens + new_tokens > MAX_MODEL_TOKENS:
        raise ValueError(
            f"the prompt has {prompt_tokens} tokens and {new_tokens} new ones are asked for: a generation holds at "
            f"most {MAX_MODEL_TOKENS} tokens here; shorten the prompt to {MAX_MODEL_TOKENS - new_tokens} tokens or "
            "ask for fewer"
        )


def start(loaded, text: str, new_tokens: int) -> _Running:
    """Prefill: the prompt through the model with a fresh cache; every prompt token's rows and next-token top."""
    model, tokenizer = loaded.lm, loaded.tokenizer
    if model is None:
        raise ValueError(f"{loaded.info.title} is an encoder: it reads a sentence whole and writes no next token")
    with TOKENIZING:
        ids = tokenizer(text)["input_ids"]
        raw = tokenizer.convert_ids_to_tokens(ids)
    if not ids:
        raise ValueError(f"the prompt gives no tokens for {loaded.info.title}; type a sentence")
    check_generation(len(ids), new_tokens)
    device = next(model.parameters()).device
    record: list[dict] = []
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        out = model(
            input_ids=torch.tensor([ids], device=device), past_key_values=cache, use_cache=True, attention_record=record
        )
    weights = torch.stack([entry["weights"].float() for entry in attention_entries(record)]).cpu()  # [layers, h, p, p]
    positions = tuple(
        Position(
            readable_token(tokenizer, token),
            token_id,
            False,
            weights[:, :, i, : i + 1].clone(),
            _top(tokenizer, out.logits[0, i]),
            i + 1,
        )
        for i, (token, token_id) in enumerate(zip(raw, ids, strict=True))
    )
    generation = Generation(positions, len(ids), new_tokens, False, _cache_bytes_per_position(model.config, cache))
    logits = out.logits[0, -1].float().cpu()
    return _Running(generation, cache, int(logits.argmax()), logits)


def step(loaded, running: _Running) -> Position:
    """One greedy step: the chosen next token into the model with the cache; its rows, and the next choice."""
    model, tokenizer = loaded.lm, loaded.tokenizer
    device = next(model.parameters()).device
    record: list[dict] = []
    with torch.inference_mode():
        out = model(
            input_ids=torch.tensor([[running.next_id]], device=device),
            past_key_values=running.cache,
            use_cache=True,
            attention_record=record,
        )
    t = len(running.generation.positions) + 1  # the tokens so far, this one included
    entries = attention_entries(record)
    rows = torch.stack([_over_every_token(entry["weights"][:, 0].float(), t) for entry in entries]).cpu()
    logits = out.logits[0, -1].float().cpu()
    token = readable_token(tokenizer, tokenizer.convert_ids_to_tokens(running.next_id))
    held = max(layer.keys.shape[-2] for layer in running.cache.layers)  # a sliding window's layers hold fewer
    position = Position(token, running.next_id, True, rows, _top(tokenizer, logits), held)
    running.generation = running.generation.plus(position, running.next_id in _end_ids(model))
    running.next_id, running.logits = int(logits.argmax()), logits
    return position


class GenerationLost(LookupError):
    """A step was asked for a generation the worker does not hold (it was started again, or the run ended)."""


class Generations:
    """The generations under way in the worker, by id, with their caches; the oldest goes past KEPT."""

    KEPT = 8

    def __init__(self):
        self._running: collections.OrderedDict[str, _Running] = collections.OrderedDict()
        self._lock = threading.Lock()

    def start(self, loaded, gen_id: str, text: str, new_tokens: int) -> Generation:
        running = start(loaded, text, new_tokens)
        with self._lock:
            self._running[gen_id] = running
            while len(self._running) > self.KEPT:
                self._running.popitem(last=False)
        return running.generation

    def step(self, loaded, gen_id: str) -> tuple[Position, bool]:
        """The next token's Position, and whether it ended the text (what crosses the pipe: one position)."""
        with self._lock:
            running = self._running.get(gen_id)
        if running is None:
            raise GenerationLost(f"the model worker holds no generation {gen_id!r}: it was started again")
        return step(loaded, running), running.generation.ended

    def end(self, gen_id: str) -> None:
        with self._lock:
            self._running.pop(gen_id, None)


def generate(loaded, text: str, new_tokens: int) -> Generation:
    """The whole greedy generation at once (tests, the benchmark): prefill, then steps until done."""
    running = start(loaded, text, new_tokens)
    while not running.generation.done:
        step(loaded, running)
    return running.generation


__all__ = [
    "MAX_NEW_TOKENS",
    "Generation",
    "GenerationLost",
    "Generations",
    "Position",
    "check_generation",
    "generate",
    "start",
    "step",
]
