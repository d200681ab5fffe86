"""The masks' sweep kept on disk: a server started again (a lecturer's laptop after a restart, a class's pod
replaced) measures every mask again in a moment, where it took the minutes of 21 passes the first time.

Where: $ATTENTION_SWEEP_CACHE, else sweep/ in the model cache (sources.model_cache_dir: $ATTENTION_MODEL_CACHE,
else the user's cache folder), beside the converted SmolLM2. A folder that cannot be written is left alone: the
point is measured as before, and the server's log says why, once.

A point is kept under everything its numbers follow from, so that nothing kept is ever shown for something else:
the model's files (each one's name, size and time of change: a model written anew is measured anew), the code
that measures it (every module of attention_core/ and the long text, by their bytes), torch's
and transformers' versions, the device (on a CPU, the kernels torch computes with: they round differently), and
the point's mask, budget and length. A kept file that cannot be read is measured again and written anew.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

import torch
import transformers

from attention_core.device import cpu_kernels
from attention_core.models import sparse
from attention_core.models.sources import model_cache_dir

log = logging.getLogger(__name__)
CORE = Path(__file__).resolve().parents[1]  # attention_core/
MEASURED_BY = (*sorted(CORE.rglob("*.py")), CORE / "data" / "long-text.txt")
FOLDER_ENV = "ATTENTION_SWEEP_CACHE"


def kept_folder() -> Path:
    """Where points are kept (see the module's words)."""
    return Path(os.environ.get(FOLDER_ENV) or model_cache_dir() / "sweep")


@functools.cache
def code_digest() -> str:
    """The bytes of the code and text a point is measured by, with the libraries' versions."""
    digest = hashlib.sha256(f"torch {torch.__version__} transformers {transformers.__version__}".encode())
    for path in MEASURED_BY:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def model_files(folder: Path) -> list[tuple[str, int, int]]:
    """Each file of a model's folder (or the one file, a GGUF): its name, size and time of change."""
    if not folder.is_dir():
        return [(folder.name, folder.stat().st_size, folder.stat().st_mtime_ns)]
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return [(str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in files]


def point_file(loaded, mask: str, budget: int, tokens: int) -> Path | None:
    """The file a point is kept in; None where the model's files are not on this disk (nothing to know it by)."""
    folder = Path(str(getattr(loaded.model, "name_or_path", "")))
    if not str(folder) or not folder.exists():
        return None
    where = loaded.device if loaded.device != "cpu" else f"cpu {cpu_kernels()}"
    what = [code_digest(), model_files(folder), where, mask, budget, tokens]
    name = hashlib.sha256(json.dumps(what).encode()).hexdigest()[:32]
    return kept_folder() / f"{name}.pt"


def kept_point(loaded, mask: str, budget: int, tokens: int):
    """The point kept on disk for this model, mask, budget and length; else sparse.measure it, keep it, return it."""
    path = point_file(loaded, mask, budget, tokens)
    if path is not None and path.is_file():
        try:
            return sparse.Point(**torch.load(path, weights_only=True))
        except Exception as error:  # noqa: BLE001  (a file cut short or from elsewhere: measured again)
            log.warning("a kept point could not be read (%s): measured again", error)
    point = sparse.measure(loaded, mask, budget, tokens)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as part:
                torch.save({field: getattr(point, field) for field in point.__dataclass_fields__}, part)
            os.replace(part.name, path)  # whole or not at all: a reader never sees half a file
        except OSError as error:
            _say_once(f"the masks' points are not kept on disk ({error}); set {FOLDER_ENV} to a folder")
    return point


@functools.cache
def _say_once(message: str) -> None:
    log.warning(message)
