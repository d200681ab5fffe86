"""Shared test setup: the repository root on sys.path, and small helpers."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module")
def worker():
    """A model worker process for one test module (tests/test_generation.py, tests/test_models_bundled.py)."""
    from attention_core.models.worker import ModelWorker  # after the root is on sys.path

    worker = ModelWorker()
    yield worker
    worker.close()
