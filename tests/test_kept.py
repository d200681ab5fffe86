"""The masks' sweep kept on disk (attention_core/models/kept.py): a point measured once is read back equal, field by
field and bit for bit, and not measured again; a model written anew, other code or another point is not read for
it; a kept file cut short is measured again and written anew; a folder that cannot be written costs nothing but
the keeping."""

from __future__ import annotations

import dataclasses
import os
import shutil
from types import SimpleNamespace

import pytest
import torch

from attention_core.models import kept, sparse

pytestmark = [pytest.mark.models, pytest.mark.xdist_group("models")]


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """The sweep's measurements counted (each still sparse.measure's own), its points kept under tmp_path."""
    monkeypatch.setenv(kept.FOLDER_ENV, str(tmp_path / "sweep"))
    measured = []
    real = sparse.measure

    def measure(*args):
        measured.append(args[1:])
        return real(*args)

    monkeypatch.setattr(sparse, "measure", measure)
    return measured


def equal(one: sparse.Point, other: sparse.Point) -> bool:
    return all(
        torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        for a, b in zip(dataclasses.astuple(one), dataclasses.astuple(other), strict=True)
    )


def test_a_point_kept_is_read_back_equal_and_a_file_cut_short_is_measured_again(smollm2, counted, tmp_path):
    first = kept.kept_point(smollm2, "window", 8, 512)
    files = list((tmp_path / "sweep").glob("*.pt"))
    assert len(files) == 1 and counted == [("window", 8, 512)]
    assert float(first.lost.max()) > 0  # a window of 8 loses weight: the tensors kept are not zeros
    again = kept.kept_point(smollm2, "window", 8, 512)
    assert counted == [("window", 8, 512)] and equal(again, first)  # read, not measured
    files[0].write_bytes(files[0].read_bytes()[:100])  # a file cut short (a disk that filled up)
    third = kept.kept_point(smollm2, "window", 8, 512)
    assert len(counted) == 2 and equal(third, first)  # measured again, to the same numbers on this machine
    assert equal(sparse.Point(**torch.load(files[0], weights_only=True)), first)  # and written anew, whole
    assert not list((tmp_path / "sweep").glob("*.part"))


def test_a_folder_that_cannot_be_written_costs_only_the_keeping(smollm2, monkeypatch, tmp_path, caplog):
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv(kept.FOLDER_ENV, str(blocked / "sweep"))
    point = kept.kept_point(smollm2, "causal", 0, 512)
    assert point.mask == "causal" and point.loss > 0
    assert any("not kept on disk" in record.getMessage() for record in caplog.records)


def test_a_point_is_kept_under_its_model_files_its_code_and_its_own_settings(tmp_path, monkeypatch):
    """The file a point is kept in, for a model's folder on disk: another for a model written anew (a file's time
    of change), for other code, for another device or kernels, mask, budget or length; the same for the same."""
    monkeypatch.setenv(kept.FOLDER_ENV, "")  # the model cache's own folder, where nothing else says
    monkeypatch.setenv("ATTENTION_MODEL_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "config.json").write_text("{}")
    loaded = SimpleNamespace(model=SimpleNamespace(name_or_path=str(folder)), device="cpu")
    here = kept.point_file(loaded, "window", 8, 512)
    assert here == kept.point_file(loaded, "window", 8, 512) and here.parent == tmp_path / "cache" / "sweep"
    others = {
        kept.point_file(loaded, "sinks", 8, 512),
        kept.point_file(loaded, "window", 16, 512),
        kept.point_file(loaded, "window", 8, 1024),
        kept.point_file(SimpleNamespace(model=loaded.model, device="cuda"), "window", 8, 512),
    }
    assert here not in others and len(others) == 4
    stat = (folder / "model.safetensors").stat()
    os.utime(folder / "model.safetensors", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert kept.point_file(loaded, "window", 8, 512) != here  # the model written anew
    rewritten = kept.point_file(loaded, "window", 8, 512)
    code = tmp_path / "code"
    shutil.copytree(kept.CORE, code, ignore=shutil.ignore_patterns("__pycache__", "*.safetensors"))
    (code / "masks.py").write_text((code / "masks.py").read_text() + "\n# another line\n")
    kept.code_digest.cache_clear()
    monkeypatch.setattr(kept, "MEASURED_BY", (*sorted(code.rglob("*.py")), code / "data" / "long-text.txt"))
    try:
        assert kept.point_file(loaded, "window", 8, 512) != rewritten  # other code
    finally:
        kept.code_digest.cache_clear()
    assert (
        kept.point_file(
            SimpleNamespace(model=SimpleNamespace(name_or_path="HuggingFaceTB/x"), device="cpu"), "window", 8, 512
        )
        is None
    )  # fmt: skip  (no files on this disk to know it by)
