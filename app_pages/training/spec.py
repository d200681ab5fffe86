"""The Training page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import DISPLAY, SENTENCE, PageSpec

# Training reads the layer's sizes, scaling and seed from the sidebar, and its own causal and steps.
SPEC = PageSpec(
    "app_pages/training/training.py",
    "Training",
    ":material/school:",
    SENTENCE | DISPLAY | {"d_model", "d_k", "heads", "scaled", "seed", "train_causal", "train_steps"},
    slides=(
        ("train", "Train and watch"),
        ("predict", "Predict, loss, update"),
        ("layer", "On a sentence"),
        ("projections", "W_Q, W_K, W_V"),
        ("sqrt", "√d_k in training"),
    ),
    slide_key="t_slide",
    own=frozenset({"t_step", "t_run", "t_query", "t_lecture"}),
    cases=frozenset({"smoke"}),
)
