"""Check your attention: a student's stages against the app's, in order, with the mistake named.

stages.py: the stages' names in three libraries and the app's values; mistakes.py: the catalogue of mistakes, each
computed; verdict.py: the layouts, the comparison and the verdict; rounding.py: what float32 may be off by;
files.py: the inputs a student downloads, and reading what they upload (never a pickle).
"""

from attention_core.checking.files import (
    MAX_UPLOAD_BYTES,
    inputs_arrays,
    inputs_settings,
    load_snippet,
    read_outputs,
)
from attention_core.checking.mistakes import MISTAKES, Mistake
from attention_core.checking.stages import ALIASES, STAGES, expected, stage_of
from attention_core.checking.verdict import StageCheck, Verdict, check, take

__all__ = [
    "ALIASES",
    "MAX_UPLOAD_BYTES",
    "MISTAKES",
    "STAGES",
    "Mistake",
    "StageCheck",
    "Verdict",
    "check",
    "expected",
    "inputs_arrays",
    "inputs_settings",
    "load_snippet",
    "read_outputs",
    "stage_of",
    "take",
]
