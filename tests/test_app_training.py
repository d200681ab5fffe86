"""The Training page through AppTest: step 0, train, follow, scrub, stop, a link's step, export, and the trained
layer loaded into the Walkthrough. Every number the page states is checked against the engine's."""

import statistics

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attention_core.device import cpu_kernels
from attention_core.limits import MAX_TRAIN_STEPS
from attention_core.training import (
    GROUPS,
    LEARNED_PREDICTED,
    LEARNED_WEIGHT,
    LECTURE_SENTENCE,
    SUBJECT,
    VERB,
    TrainingConfig,
    checkpoint_trace,
    held_out_attention,
    held_out_sentences,
    learning_rate,
    lesson,
    load_lecture_model,
    train,
)
from attention_core.training.background import live
from figures.training import shown_against
from tests.plotly_spec import decode
from tests.test_app import ROOT, TIMEOUT, chart_titled, no_problems, panel, shown
from ui.training import GRAMMAR, shared_run, untrained

STEPS = TrainingConfig().steps


@pytest.fixture
def page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    return at.switch_page("app_pages/training/training.py").run()


def trained(at, **widgets):
    """Press Train (after setting sidebar widgets), wait for the run, and show the page it ends on."""
    for key, value in widgets.items():
        at.session_state[key] = value
    at.run()
    at.button(key="t_start").click().run()
    no_problems(at)
    at.session_state["training"].join(timeout=120)
    return at.run()


def step_line(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Step "))


def test_before_training_the_page_shows_step_0_and_greys_the_walkthroughs_mask(page):
    # Runs are shared by every session: a seed no other test trains, so that this config is untrained in any order.
    page.session_state["seed"] = 4242
    page.run()
    no_problems(page)
    assert page.title[0].value == "Watch attention learn"
    assert any(c.value.startswith("Step 0: W_Q, W_K, W_V drawn at random") for c in page.caption)
    assert page.toggle(key="causal").disabled and not page.toggle(key="train_causal").disabled
    assert step_line(page).startswith("**Step 0**")
    # The sidebar's default sentence is not in the grammar: the page says which words, and shows one that is.
    assert any("has no 'The', 'next', 'day', 'is', 'bright'" in shown(c) for c in page.caption)


def test_the_grammar_is_described_by_its_own_numbers(page):
    text = next(m.value for m in page.markdown if "held out, to measure what was learned" in m.value)
    assert text.startswith(f"{TrainingConfig().sentences:,} sentences") and f"fall into {GROUPS} groups" in text
    assert "Alice never eats: “Alice will eat pizza” is new to the model" in text
    assert GRAMMAR.held_out("Alice", "eat") and GRAMMAR.object_of("Alice", "eat") == "pizza"
    trained_on = GRAMMAR.sentences(TrainingConfig().sentences, seed=0)
    assert not [s for s in trained_on if s[0] == "Alice" and s[2] == "eat"]
    assert f"Each step learns from {TrainingConfig().batch} of the sentences" in text


def test_train_then_scrub_shows_the_layer_as_it_was_at_each_step(page):
    at = trained(page)
    no_problems(at)
    run = at.session_state["training"].run
    assert any(c.value.startswith(f"Trained: {STEPS} steps") for c in at.caption)
    assert at.select_slider(key="t_step").value == STEPS
    # The sidebar's sentence is not in the grammar: the page shows one whose group the verb looks at most.
    groups = held_out_attention(run.checkpoints[-1], run, held_out_sentences()).by_group
    subject = GRAMMAR.subjects[groups.index(max(groups))]
    assert any(f"Showing “{subject} will eat" in shown(c) and "looks at most after training" in shown(c)
               for c in at.caption)  # fmt: skip
    at.select_slider(key="t_step").set_value(100).run()
    no_problems(at)
    checkpoint = run.checkpoint_at(100)
    measured = held_out_attention(checkpoint, run, held_out_sentences())
    mean = measured.by_position.numpy()[0]
    assert step_line(at).startswith(
        f"**Step 100**, over 300 held-out sentences: the verb puts **{mean[2, 0]:.2f}** of its attention on the "
        f"subject (looking evenly would give 0.33), and the model predicts the object of "
        f"**{shown_against(measured.predicted, LEARNED_PREDICTED, percent=True)}** of them."
    )
    lower = np.tril(np.ones((4, 4), bool))  # the rest is masked: drawn grey, with no number
    shown_map = panel(at, "mean attention weights at step 100").z
    np.testing.assert_allclose(shown_map[lower], mean[lower], rtol=1e-5, atol=1e-6)
    assert np.isnan(shown_map[~lower]).all()
    loss = chart_titled(at, "next-word loss")
    assert decode(loss["data"][2]["x"]).tolist() == [100]  # the step on screen, marked on the curve
    assert decode(loss["data"][0]["y"]) == pytest.approx(run.loss, rel=1e-6)
    # A sentence of the grammar's words, typed in the sidebar: that sentence's own map at that step.
    at.text_area(key="text").input("bob will DRINK coffee").run()
    no_problems(at)
    expected = checkpoint_trace(checkpoint, run, ("Bob", "will", "drink", "coffee"))
    np.testing.assert_allclose(panel(at, "attention weights").z[expected.mask.numpy()],
                               expected.weights[0].numpy()[expected.mask.numpy()], rtol=1e-5)  # fmt: skip


def test_a_default_group_is_named_only_where_its_numbers_show_it(page):
    """Step 0 names none (nothing is predicted yet); at a run's end the page names a group exactly when the verb
    puts less than even on its subjects while the model predicts at least 90% of their objects, and that is one
    group, with those numbers."""
    at = trained(page)
    run = at.session_state["training"].run
    measured = held_out_attention(run.checkpoints[-1], run, held_out_sentences())
    defaults = [g for g in range(GROUPS) if measured.by_group[g] < 1 / 3 and measured.predicted_by_group[g] >= 0.9]
    line = step_line(at)
    assert ("(its default)" in line) == (len(defaults) == 1)
    if len(defaults) == 1:
        g = defaults[0]
        assert f"hardly looks at the subjects of group {g + 1} ({GRAMMAR.subjects[g]}, " in line
        assert f"By subject group: {', '.join(f'{w:.2f}' for w in measured.by_group)}." in line
    at.select_slider(key="t_step").set_value(0).run()
    assert step_line(at).startswith("**Step 0**") and "its default" not in step_line(at)


def test_a_run_can_be_stopped_and_a_session_trains_one_run_at_a_time(page):
    page.session_state["train_steps"] = MAX_TRAIN_STEPS
    page.session_state["seed"] = 7
    page.run()
    page.button(key="t_start").click().run()
    training = page.session_state["training"]
    assert training.running
    page.session_state["seed"] = 8  # another config while the first trains: refused, by name
    page.run()
    page.button(key="t_start").click().run()
    assert any("one training per session" in e.value for e in page.error)
    page.session_state["seed"] = 7
    page.run()
    page.button(key="t_stop").click().run()
    training.join(timeout=60)
    page.run()
    no_problems(page)
    assert training.state == "stopped" and len(training.run.loss) < MAX_TRAIN_STEPS + 1
    assert any(c.value.startswith("Stopped:") for c in page.caption)
    assert page.select_slider(key="t_step").value == training.run.checkpoints[-1].step


def opened(params: dict) -> AppTest:
    """The Training page opened from a link with these values, its run trained and shown (a run that another
    session has trained is shown as it is: runs are shared)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.switch_page("app_pages/training/training.py").run()
    # The run the page shows: this session's, or one of the same config that another test's session started and
    # that may still be training (runs are shared).
    for training in live():
        training.join(timeout=120)
    return at.run()


def test_a_link_with_a_step_trains_from_the_seed_and_opens_at_that_step():
    at = opened({"t_step": "200", "seed": "3"})
    no_problems(at)
    assert at.select_slider(key="t_step").value == 200
    # The page's run: this session's, or the same config's that another test's session trained first (runs are
    # shared: the registry's). Not this session's slot, which a run it did not start leaves empty (any order).
    run = shared_run(TrainingConfig(seed=3)).run
    _, alone = train(TrainingConfig(seed=3))
    assert run.loss == alone.loss  # the same weights, recomputed from the seed
    # The address names the run shown (its fingerprint and this CPU's kernels), so that a copied link can be checked.
    assert at.query_params["t_run"] == f"{alone.fingerprint()}-{cpu_kernels()}"
    assert not [i for i in at.info if "recomputed here" in i.value]  # the link named no run: nothing to compare


def test_a_link_says_whether_its_run_was_recomputed_with_the_same_numbers():
    """Opened where the link was made (the same fingerprint): said to be bit for bit the same. Opened where the
    CPU computes otherwise (another fingerprint, other kernels): said to differ, with both kernels named."""
    ours = f"{train(TrainingConfig(seed=3))[1].fingerprint()}-{cpu_kernels()}"
    same = opened({"t_step": "200", "seed": "3", "t_run": ours})
    no_problems(same)
    assert any(c.value == "The same numbers, bit for bit, as the run that made this link." for c in same.caption)
    elsewhere = "0123abcd-" + ("AVX2" if cpu_kernels() != "AVX2" else "AVX512")
    other = opened({"t_step": "200", "seed": "3", "t_run": elsewhere})
    no_problems(other)
    said = [i.value for i in other.info if "recomputed here from the seed" in i.value]
    assert said and f"computing with {elsewhere[9:]} kernels, this one computes with {cpu_kernels()}" in said[0]
    assert other.query_params["t_run"] == ours  # the address now names the run shown here
    kernels_alike = opened({"t_step": "200", "seed": "3", "t_run": f"0123abcd-{cpu_kernels()}"})
    assert any("another thread count or torch build" in i.value for i in kernels_alike.info)


def test_a_link_whose_run_is_not_a_fingerprint_is_named_and_left_out():
    at = opened({"t_step": "200", "seed": "3", "t_run": "<b>xyz"})
    no_problems(at)
    assert any("the training run = '<b>xyz', which is not used: it must be 8 hex digits" in shown(w)
               for w in at.warning)  # fmt: skip
    assert not [i for i in at.info if "recomputed here" in i.value]


def test_the_trained_weights_load_into_the_walkthrough_with_every_stage(page):
    at = trained(page)
    at.text_area(key="text").input("Carol may play piano").run()
    download = [b for b in at.get("download_button") if f"weights at step {STEPS}" in b.proto.label]
    assert download
    at.button(key="use-trained").click().run()
    no_problems(at)
    assert any("now in the sidebar's typed-number fields" in s.value for s in at.success)
    at.switch_page("app_pages/walkthrough/walkthrough.py").run()
    no_problems(at)
    run = at.session_state["training"].run
    expected = checkpoint_trace(run.checkpoints[-1], run, ("Carol", "may", "play", "piano"))
    lower = expected.mask.numpy()
    weights = panel(at, "attention weights").z[lower]  # the typed numbers keep 6 significant digits
    np.testing.assert_allclose(weights, expected.weights[0].numpy()[lower], rtol=1e-3, atol=1e-5)
    assert at.session_state["causal"] is True and not at.warning  # every typed matrix fits and is used
    named = f"trained (Training page, seed {run.config.seed}, step {STEPS})"
    assert any(f"Here: W_Q, W_K, W_V {named}." in m.value for m in at.markdown)  # not "typed"


@pytest.mark.slow  # trains runs of its own
def test_the_sqrt_dk_experiment_states_what_its_runs_measured(page):
    page.button(key="t_sqrt").click().run()
    for scaled in (True, False):
        page.session_state[f"sqrt-{scaled}"].join(timeout=120)
    page.run()
    no_problems(page)
    scaled, unscaled = (page.session_state[f"sqrt-{s}"].run for s in (True, False))
    lines = [m.value for m in page.markdown if m.value.startswith("- Loss over the last")]
    assert lines and f"not scaled {statistics.fmean(unscaled.loss[-50:]):.3f}" in lines[0]
    assert chart_titled(page, "d_k = 64: rows with max weight")
    # That unscaled rows saturate is checked over three seeds (tests/test_training.py): at the page's 2,000 steps
    # one seed's share of saturated rows depends on the CPU's kernels (seed 0: 0%, 39% or 98% on three paths).
    shares = [statistics.fmean(run.saturated[-50:]) for run in (scaled, unscaled)]
    assert any(f"scaled {shares[0]:.0%}, not scaled {shares[1]:.0%}" in m.value for m in page.markdown)


def test_a_run_that_did_not_learn_it_is_told_so_with_its_numbers():
    """Ten steps learn nothing, on any CPU: the page says so at the run's end, with the numbers it judged by.
    The default run is told so exactly when it did not learn it (HeldOut.learned), and only at its end."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    at = trained(at.switch_page("app_pages/training/training.py").run(), train_steps=10)
    no_problems(at)
    run = at.session_state["training"].run
    measured = held_out_attention(run.checkpoints[-1], run, held_out_sentences())
    assert not measured.learned
    stuck = [w.value for w in at.warning if w.value.startswith("This run did not learn it")]
    assert stuck and (f"ends at {shown_against(measured.verb_to_subject, LEARNED_WEIGHT)} and "
                      f"{shown_against(measured.predicted, LEARNED_PREDICTED, percent=True)}") in stuck[0]  # fmt: skip
    at = trained(at, train_steps=STEPS)
    run = at.session_state["training"].run
    learned = held_out_attention(run.checkpoints[-1], run, held_out_sentences()).learned
    assert bool([w for w in at.warning if w.value.startswith("This run did not learn it")]) == (not learned)
    at.select_slider(key="t_step").set_value(200).run()  # only the run's end is judged
    assert not [w for w in at.warning if w.value.startswith("This run did not learn it")]


def test_a_link_to_a_step_the_run_does_not_keep_is_named():
    """The step is named and left out: the page is as the link without it shows it. With no run of the link's
    config, that is step 0 and ▶ Train; with one (another reader's, shared), its last step."""
    refusal = "training step = '99999', which is not used: it must be one of 0, 10, 20"
    fresh = opened({"t_step": "99999", "seed": "12"})  # a seed no other test trains
    no_problems(fresh)
    assert any(refusal in w.value for w in fresh.warning)
    assert "training" not in fresh.session_state and not [s for s in fresh.select_slider if s.key == "t_step"]
    assert fresh.button(key="t_start").label == "▶ Train"
    opened({"t_step": "200", "seed": "11"})  # a reader's link trains seed 11: the run is shared from then on
    at = opened({"t_step": "99999", "seed": "11"})
    no_problems(at)
    assert any(refusal in w.value for w in at.warning)
    assert at.select_slider(key="t_step").value == TrainingConfig().steps  # the last step, as with no link


def lesson_text(at) -> str:
    return next(m.value for m in at.markdown if m.value.startswith("**Predict.**"))


@pytest.mark.parametrize("when", ["before training", "trained"])
def test_the_prediction_loss_and_update_are_this_steps_own_numbers(page, when):
    """Lecture 002's training slide: P(answer | prompt), L = −log P, η of this step and the loss after one step
    of W ← W − η·∂L/∂W, each as the engine computes it for the sentence on screen."""
    if when == "trained":
        at = trained(page, seed=2)
        run = at.session_state["training"].run
    else:  # a seed no other test trains: the shared registry has no run of it
        page.session_state["seed"] = 7
        at = page.run()
        run = untrained(TrainingConfig(seed=7))
    at.text_area(key="text").input("Carol may play piano").run()
    no_problems(at)
    checkpoint = run.checkpoints[-1]
    expected = lesson(checkpoint, run, ("Carol", "may", "play", "piano"))
    text = lesson_text(at)
    assert f"At step {checkpoint.step} the model reads “Carol may play”" in text
    assert f"P(piano | Carol may play) = **{expected.probability:.3f}**" in text
    assert f"= −log {expected.probability:.3f} = **{expected.loss:.3f}** nats" in text
    assert f"η = {learning_rate(run.config, checkpoint.step):.3g}" in text
    falls = "falls" if expected.after < expected.loss else "rises"
    assert f"it {falls} by {abs(expected.after - expected.loss):.2g}" in text
    best = run.vocabulary[int(expected.probabilities.argmax())]
    assert (f"most probable next word is “{best}”, the right one" in text) == (best == "piano")
    bars = chart_titled(at, "P(next word | Carol may play)")["data"][0]
    assert decode(bars["x"])[0] == pytest.approx(float(expected.probabilities.max()), rel=1e-6)


def test_one_word_has_no_next_word_prediction_and_says_so(page):
    page.text_area(key="text").input("Alice").run()
    no_problems(page)
    assert any("needs two words at least" in i.value for i in page.info)


def test_lecture_002s_model_is_the_shipped_run_and_its_layer_shows_eat_looking_at_alice(page):
    """The switch shows the shipped run at once, finished (nothing trains, ▶ Train is off), whatever the sidebar's
    sizes and seed; its caption names the seed and how it was found; the layer's "eat" looks at "Alice"."""
    page.text_area(key="text").input("Alice will eat pizza").run()
    page.slider(key="d_model").set_value(12).run()  # not the lecture model's size: the switch shows its own
    page.toggle(key="t_lecture").set_value(True).run()
    no_problems(page)
    model = load_lecture_model()
    [said] = [c.value for c in page.caption if c.value.startswith("Lecture 002's model")]
    assert f"the default run with seed {model.seed}, the first seed whose run learned the rule" in said
    assert model.made_on in said and "It ships with the app" in said
    for seed, _, _ in model.tried[:-1]:
        assert f"seed {seed}: " in said
    assert page.button(key="t_start").disabled
    assert any(c.value == f"Trained: {model.run.config.steps} steps, shipped." for c in page.caption)
    assert any(c.value.startswith(f"d_model {model.run.config.d_model} · d_k") for c in page.caption)
    trace = checkpoint_trace(model.run.checkpoints[-1], model.run, LECTURE_SENTENCE)
    weights = panel(page, "attention weights").z
    assert weights[VERB][SUBJECT] == trace.weights[0, VERB, SUBJECT].item()  # the same numbers, drawn
    assert weights[VERB][SUBJECT] >= LEARNED_WEIGHT
    assert "t_run" not in page.query_params  # the switch names the run


@pytest.mark.slow  # trains runs of its own
def test_on_lecture_002s_sentence_a_run_that_leaves_alice_to_its_default_says_so_and_offers_the_lectures(page):
    """Whether this run's "eat" looks at "Alice" depends on the CPU; the page says so exactly when it does not."""
    at = trained(page, seed=2)
    at.text_area(key="text").input("Alice will eat pizza").run()
    no_problems(at)
    run = at.session_state["training"].run
    weight = checkpoint_trace(run.checkpoints[-1], run, LECTURE_SENTENCE).weights[0, VERB, SUBJECT].item()
    offered = [i.value for i in at.info if "Switch on **Lecture 002's model**" in i.value]
    assert bool(offered) == (weight < LEARNED_WEIGHT)


def test_a_links_step_that_no_run_keeps_is_named_before_any_run_is_trained():
    """Issue 40: /training?t_step=99999 was dropped without a word when no run existed yet. Now it is named at
    once, and no run is trained for it."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update({"t_step": "99999"})
    at.switch_page("app_pages/training/training.py").run()
    warned = " ".join(w.value for w in at.warning)
    assert "training step = '99999'" in warned and "it must be one of 0, 10, 20" in warned, warned
    assert "t_step" not in at.query_params
    assert "training" not in at.session_state or at.session_state["training"] is None  # nothing trained


def test_an_action_sent_before_the_page_saw_play_stop_does_not_play_again_from_step_0(page):
    """Play stops itself at the last step. A browser that has not yet drawn its switch off and sends an action then
    (a click on Leave, a slide's key) sends play's old "on" with it: that is no press of play, and must not play
    again from step 0 (it did, in 2 of 4 full suites: the training walk's Leave, clicked as play ended)."""
    at = trained(page)
    steps = [c.step for c in at.session_state["training"].run.checkpoints]
    at.select_slider(key="t_step").set_value(steps[-2]).run()
    next(t for t in at.toggle if t.label == "▶ play").set_value(True).run()  # one tick: at the last step
    assert at.select_slider(key="t_step").value == steps[-1]
    seen_by_the_browser = at._tree.get_widget_states()  # what a browser that still shows play on would send
    at.run()  # the tick at the end: play stops
    assert at.select_slider(key="t_step").value == steps[-1]
    assert not next(t for t in at.toggle if t.label == "▶ play").value
    at._run(widget_state=seen_by_the_browser)
    no_problems(at)
    assert at.select_slider(key="t_step").value == steps[-1]
    assert not next(t for t in at.toggle if t.label == "▶ play").value
    # A press of play at the end (the switch turned on where it was drawn off) still plays from the start.
    next(t for t in at.toggle if t.label == "▶ play").set_value(True).run()
    assert at.select_slider(key="t_step").value == steps[1]
