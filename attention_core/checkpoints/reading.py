"""A checkpoint's tensors, read without unpickling anything: a `state_dict` saved as .safetensors, or as a torch
file (.pt, .pth) read with weights_only=True. A torch file may hold the state_dict itself or wrap it, as nanoGPT's
ckpt.pt does ({"model": state_dict, "model_args": {...}}); what it says about the model (its heads, its
vocabulary) is kept beside the tensors."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import struct
from collections.abc import Mapping

import torch

MAX_CHECKPOINT_MB = 64  # the server's largest upload (.streamlit/config.toml: server.maxUploadSize)
WRAPPERS = ("model", "state_dict", "model_state_dict", "module")  # where a training script keeps the state_dict
COMPILED = "_orig_mod."  # torch.compile's prefix on every name (nanoGPT's sample.py strips it too)
HEADS_NAMES = ("heads", "n_head", "n_heads", "num_heads", "num_attention_heads")  # this app's own, nanoGPT's, ...
KV_HEADS_NAMES = ("n_kv_heads", "num_key_value_heads", "n_kv_head")
VOCABULARY_NAMES = ("itos", "vocab", "vocabulary")  # a list of token strings, by id; "stoi" maps token -> id


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A file's floating-point tensors by name (float32, or float64 where saved so; on the CPU), and what the file
    says of its model."""

    name: str
    digest: str  # 12 hex digits of the file's bytes: the same file, the same digest
    tensors: Mapping[str, torch.Tensor]
    facts: Mapping[str, int]  # heads, kv_heads: where the file says them
    vocabulary: tuple[str, ...] = ()  # token strings by id, where the file holds them
    other: tuple[str, ...] = ()  # entries that are not floating-point tensors (buffers of ints or bools)


def digest_of(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=6).hexdigest()


def read_checkpoint(filename: str, data: bytes) -> Checkpoint:
    """The tensors of a .safetensors or .pt/.pth file; ValueError naming what is wrong. A pickle is never run."""
    if len(data) > MAX_CHECKPOINT_MB * 2**20:
        size = f"{len(data) / 2**20:.1f} MB"
        raise ValueError(f"{filename} is {size}; a checkpoint may be at most {MAX_CHECKPOINT_MB} MB")
    suffix = filename.lower().rsplit(".", 1)[-1]
    try:
        if suffix == "safetensors":
            from safetensors.torch import load

            entries, about = dict(load(data)), _safetensors_metadata(data)
        elif suffix in ("pt", "pth"):
            entries, about = _torch_file(torch.load(io.BytesIO(data), map_location="cpu", weights_only=True))
        else:
            raise ValueError("it must be .safetensors, .pt or .pth (a state_dict)")
    except ValueError as error:
        raise ValueError(f"{filename}: {error}") from None
    except Exception as error:  # a damaged file, or a pickle of more than tensors: each library says why
        raise ValueError(f"{filename} could not be read as .{suffix}: {str(error).splitlines()[0][:200]}") from None
    entries = {name.removeprefix(COMPILED): value for name, value in entries.items()}
    floats = {name: value for name, value in entries.items() if isinstance(value, torch.Tensor)}
    # float64 stays float64 (a test's exact weights); bfloat16 and float16 are widened to float32
    tensors = {
        name: value.detach() if value.dtype == torch.float64 else value.detach().float()
        for name, value in floats.items()
        if value.is_floating_point()
    }
    if not tensors:
        raise ValueError(f"{filename} holds no floating-point tensors: a checkpoint is a state_dict, name → tensor")
    return Checkpoint(
        filename,
        digest_of(data),
        tensors,
        _facts(about),
        _vocabulary(about),
        tuple(sorted(set(entries) - set(tensors))),
    )


def _safetensors_metadata(data: bytes) -> dict:
    """The file's __metadata__ (strings only, by the format), with JSON values read as JSON."""
    (length,) = struct.unpack("<Q", data[:8])
    metadata = json.loads(data[8 : 8 + length]).get("__metadata__") or {}
    about = {}
    for key, value in metadata.items():
        try:
            about[key] = json.loads(value)
        except ValueError:
            about[key] = value
    return about


def _torch_file(loaded) -> tuple[dict, dict]:
    """(the state_dict, the rest) of what torch.load gave: a state_dict, or a dict that wraps one."""
    if not isinstance(loaded, Mapping):
        raise ValueError(f"it holds a {type(loaded).__name__}; a checkpoint is a dict, name → tensor")
    for wrapper in WRAPPERS:
        if isinstance(loaded.get(wrapper), Mapping):
            about = {k: v for k, v in loaded.items() if k != wrapper}
            for inner in ("model_args", "config", "args"):  # nanoGPT keeps its sizes in model_args
                if isinstance(about.get(inner), Mapping):
                    about = {**about[inner], **about}
            return dict(loaded[wrapper]), about
    return {k: v for k, v in loaded.items() if isinstance(v, torch.Tensor)}, {
        k: v for k, v in loaded.items() if not isinstance(v, torch.Tensor)
    }


def _facts(about: Mapping) -> dict[str, int]:
    facts = {}
    for fact, names in (("heads", HEADS_NAMES), ("kv_heads", KV_HEADS_NAMES)):
        for name in names:
            value = about.get(name)
            if isinstance(value, int | str) and str(value).isdigit() and 0 < int(value) <= 4096:
                facts[fact] = int(value)
                break
    return facts


def _vocabulary(about: Mapping) -> tuple[str, ...]:
    """Token strings by id: a list, a {id: token} dict (nanoGPT's itos), or a {token: id} dict ("stoi")."""
    for name in VOCABULARY_NAMES:
        value = about.get(name)
        if isinstance(value, list | tuple) and all(isinstance(t, str) for t in value):
            return tuple(value)
        if isinstance(value, Mapping) and all(isinstance(i, int) and isinstance(t, str) for i, t in value.items()):
            return tuple(value.get(i, "") for i in range(max(value) + 1)) if value else ()
    stoi = about.get("stoi")
    if isinstance(stoi, Mapping) and stoi and all(isinstance(t, str) and isinstance(i, int) for t, i in stoi.items()):
        by_id = {i: t for t, i in stoi.items()}
        if min(by_id) >= 0 and max(by_id) < 10**6:
            return tuple(by_id.get(i, "") for i in range(max(by_id) + 1))
    return ()
