"""Check your attention: a student's stages against the app's, in order, with the mistake named.

verdict.py: the stages' names in three libraries, their layouts, the comparison, the catalogue of mistakes and the
verdict; files.py: the inputs a student downloads, and reading what they upload (never a pickle).
"""

from attention_core.checking.files import (
    MAX_UPLOAD_BYTES,
    inputs_arrays,
    inputs_settings,
    load_snippet,
    read_outputs,
)
from attention_core.checking.verdict import (
    ALIASES,
    MISTAKES,
    STAGES,
    Mistake,
    StageCheck,
    Verdict,
    check,
    expected,
    stage_of,
    take,
)

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
