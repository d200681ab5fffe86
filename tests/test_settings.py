"""Each setting is declared once (figures/settings.py): what the app and the notebook do with a setting follows from
its declaration. Each rule is tried on a planted breach first, where one can be planted."""

from __future__ import annotations

import dataclasses
import re

import pytest

import attention_explorer as ax
from app_pages import PAGES
from attention_core import AttentionConfig
from attention_core.controls import Control, refusal
from figures.settings import CONTROLS, DEFAULTS, config_fields
from figures.stages.records import Option
from ui.links import LINK_VALUES
from ui.sidebar import settings_from

# The one sentence a refused link value is said in (figures.settings.refusal).
REFUSAL = re.compile(r"The link asked for .+ = '.*', which is not used: it must be .+\.( Showing .+ instead\.)?")
# A value of each kind that no setting of that kind takes (a select's, a toggle's), or too long (a text's).
BAD = {"toggle": "yes", "select": "no such choice", "text": "x" * 20_001, "line": "x" * 20_001}


def test_every_setting_that_computes_sets_a_field_of_the_layer_and_the_notebook_takes_it_by_the_same_name():
    fields = {field.name for field in dataclasses.fields(AttentionConfig)}
    computing = {control.key for control in CONTROLS if control.computes}
    assert computing <= fields  # each the layer's field of its own name
    computing -= {"device"}  # the notebook's is the CPU
    assert set(ax.settings.DEFAULTS) == computing | {"text"}
    assert {name: DEFAULTS[name] for name in ax.settings.DEFAULTS} == ax.settings.DEFAULTS
    # each of them reaches the layer: a value other than its default is the layer's field's value
    changed = {"d_k": 3, "heads": 2, "causal": True, "window": 2, "seed": 7, "init": "unit", "bend": "alibi"}
    config = ax.settings.config_of(changed)
    for name, value in changed.items():
        assert getattr(config, name) == value
    with pytest.raises(KeyError):  # planted: a setting whose value is not given is not made up
        config_fields({})


def test_every_page_reads_only_settings_that_are_declared():
    declared = {control.key for control in CONTROLS} | {"example"}  # the lecture example's box sets the sentence
    for spec in PAGES:
        assert spec.reads <= declared, (spec.title, sorted(spec.reads - declared))
    assert not {"head"} <= declared  # planted: a name no setting has is seen as such


@pytest.mark.parametrize("control", [c for c in CONTROLS if c.kind in BAD], ids=lambda c: c.key)
def test_the_server_refuses_a_bad_value_of_every_setting_by_its_name(control: Control):
    """The server checks every value again (a session's state can hold anything a widget would not give): by the
    declaration's kind, or by the layer's own checks, the message names the setting."""
    with pytest.raises(ValueError) as refused:
        settings_from({**DEFAULTS, control.key: BAD[control.kind]})
    said = str(refused.value)
    assert control.key in said or control.label in said, said
    settings_from(DEFAULTS)  # and takes the defaults


def test_every_refused_link_value_is_said_in_one_sentence():
    shown = [
        *(control.refusal("no such value " * 5) for control in CONTROLS if control.kind in ("slider", "select")),
        *(value.refusal("no such value") for value in LINK_VALUES),
        Option("stage_choice", "a stage's choice", ("a", "b"), "a").refusal("c"),
        refusal("a choice", "c", "one of a, b"),
    ]
    assert shown and all(REFUSAL.fullmatch(line) for line in shown), [s for s in shown if not REFUSAL.fullmatch(s)]
    assert all(repr(("no such value " * 5)[:40]) in line for line in shown[:3])  # 40 characters of it, no more
    assert not REFUSAL.fullmatch("The link asked for d_k = '2.5', which is not used.")  # planted: another form


def test_every_shown_setting_reaches_the_pages_under_its_own_name():
    """The settings that change how things are shown (and the Training page's own) are Settings' fields by their
    declared names, made from the declarations: a value set is the value the pages read."""
    from ui.controls import Settings

    shown = [c for c in CONTROLS if c.group in ("display", "training") and not c.computes]
    assert {c.key for c in shown} <= {field.name for field in dataclasses.fields(Settings)}
    changed = {
        c.key: (not c.default if c.kind == "toggle" else c.choices[-1] if c.kind == "select" else c.low) for c in shown
    }
    assert all(changed[key] != DEFAULTS[key] for key in changed), changed
    settings = settings_from({**DEFAULTS, **changed})
    assert {key: getattr(settings, key) for key in changed} == changed
    assert settings.index_base == (1 if changed["count_from_1"] else 0)
    assert settings_from(DEFAULTS).index_base == 1  # the lectures count from 1
