"""The Real model page's facts: where it is, its title and icon, the sidebar controls it reads, its slides and
its own choices in the address (ui.pages.PageSpec says what each is)."""

from ui.pages import DISPLAY, SENTENCE, PageSpec

MODEL_TRACE = "model_trace"  # the session's last real-model trace (loading.py)

# A model trace is up to ~70 MB (SmolLM2 at the token cap): a class that has moved on does not keep 30 of them.
SPEC = PageSpec(
    "app_pages/real_model/real_model.py",
    "Real model",
    ":material/psychology:",
    SENTENCE | DISPLAY,
    keeps=(MODEL_TRACE,),
    slides=(
        ("tokens", "Its tokens and shapes"),
        ("grid", "What every head does"),
        ("thumbs", "Every layer and head"),
        ("sinks", "Attention sinks"),
        ("rollout", "Across layers: rollout"),
        ("effect", "Does this head matter?"),
        ("generate", "Writing, token by token"),
        ("masks", "Masks after MLA, measured"),
        ("long", "A long text: sink and needle"),
    ),
    slide_key="rm_slide",
    stages=True,
    own=frozenset(
        {
            "rm_model",
            "rm_layer",
            "rm_head",
            "rm_query",
            "rm_whatif",
            "kv_bytes",
            "kv_context",
            "rm_new",
            "rm_role",
            "rm_hide_first",
            "rm_words",
            "rm_upto",
            "rm_sweep_mask",
            "rm_sweep_budget",
            "rm_sweep_tokens",
            "rm_compose",
            "rm_long",
            "rm_long_source",
            "rm_long_tokens",
            "rm_needle",
            "rm_needle_depth",
            "rm_needle_text",
            "rm_question",
            "rm_answer",
            "rm_long_layer",
            "rm_long_head",
            "rm_long_pool",
            "rm_long_log",
            "rm_long_rows",
            "rm_long_keys",
            "rm_long_grid",
            "rm_long_number",
            "rm_knock",
            "rm_knock_mode",
            "rm_knock_target",
            "rm_clean",
            "rm_corrupt",
            "rm_target",
            "rm_foil",
            "rm_patch_kind",
        }
    ),
    cases=frozenset({"load", "smoke"}),
)
