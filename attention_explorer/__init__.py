"""Attention where students write it: in a notebook.

    import attention_explorer as ax

    trace = ax.trace("The next day is bright", heads=2, causal=True)
    ax.show(trace)                      # the Walkthrough's figures and sentences, inline
    result = ax.check(my_attention)     # your attention, stage by stage against the app's, the mistake named
    assert result.all_right, result
    ax.link(trace)                      # the app's address of the same view
    ax.show_model(model, tokenizer, "a sentence")   # a transformers model in memory: its heads, one head's stages
    ax.show_long(model, tokenizer, long_text)       # up to 4,096 tokens: a head's pooled map, every head's sink
    ax.knock_out(model, tokenizer, "a prompt", "L3.H5, L7.*")    # does a head matter: the prediction after
    ax.patch(model, tokenizer, clean, corrupted, " Mary", " John")  # each head patched from clean into corrupted
    ax.show_patch(patched)                                           # its map, as the app draws it
    ax.export_deck("lecture-000", "lecture-000.html")  # a deck as one HTML file (needs the app beside: a clone)

The settings are the sidebar's, by the sidebar's names (d_model, d_k, d_v, heads, kv_heads, variant, causal,
scaled, seed, positional, window, sinks, top_k, init; MLA's d_c, d_cq, d_rope), with the sidebar's defaults, so
that the same settings give the same numbers here and in the app. Nothing here imports Streamlit.
"""

from attention_explorer.checking import CaseResult, CheckResult, check
from attention_explorer.deck import export_deck
from attention_explorer.intervene import knock_out, patch, show_patch
from attention_explorer.long import ShownLong, long_trace, show_long
from attention_explorer.models import ShownModel, show_model
from attention_explorer.settings import DEFAULTS, link, trace
from attention_explorer.showing import Shown, show

__all__ = [
    "DEFAULTS",
    "CaseResult",
    "CheckResult",
    "Shown",
    "ShownLong",
    "ShownModel",
    "check",
    "export_deck",
    "knock_out",
    "link",
    "long_trace",
    "patch",
    "show",
    "show_long",
    "show_model",
    "show_patch",
    "trace",
]
