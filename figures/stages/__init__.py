"""The stages of self-attention, as one ordered registry. Plotly and NumPy only; no Streamlit.

A stage is one `Stage` record in STAGES (registry.py): its key (the trace's own name where it has one), a short
label for buttons, a title, a formula, the idea in one sentence, which traces it applies to (a real model's trace
starts at Q, K, V; MLA's latent applies to MLA only; RoPE wherever positions are rotary), its builder, and, where
it has one, the [heads, n, n] map the Multi-head page draws for every head, a per-query detail and the choices the
reader makes for it (Option). Headings are numbered by position among the stages a trace shows; pages and tests
look stages up by key. Adding a stage is one record and one builder; a variant's own stages are named in its
record (attention_core/variants/).

A builder returns its figures, the matrices they export, and `notes`: sentences about the numbers on screen,
computed from them (tests/test_claims.py checks each against the trace). The rooms:
- records.py: what a stage is (Stage, Option, Built, StageView);
- panels.py: the pieces every builder draws with;
- inputs.py, scores.py, outputs.py: the builders, in the order of the stages;
- registry.py: STAGES (register_stage adds one), the sets derived from it, and stage_view.
"""

from figures.stages.panels import banded, made, origin
from figures.stages.records import Built, Option, Stage, StageView
from figures.stages.registry import (
    BY_KEY,
    STAGES,
    brought_stages,
    grid_stages,
    heading,
    register_stage,
    stage_choices,
    stage_view,
    stages_for,
    unregister_stage,
)
from figures.stages.scores import NEAR_ONE, UNIT_VARIANCE, scaling_notes, weights_hover

__all__ = [
    "BY_KEY",
    "Built",
    "NEAR_ONE",
    "Option",
    "STAGES",
    "Stage",
    "StageView",
    "UNIT_VARIANCE",
    "banded",
    "brought_stages",
    "grid_stages",
    "heading",
    "made",
    "origin",
    "register_stage",
    "scaling_notes",
    "stage_choices",
    "stage_view",
    "stages_for",
    "unregister_stage",
    "weights_hover",
]
