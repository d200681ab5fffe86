"""ui/memo.py: values computed from an object are kept while it lives, once, and go with it."""

import gc

from ui import memo


class Thing:
    """Any object that can be weakly referenced (a trace, a figure)."""


def _held(refs) -> list:
    """Which of these entries' weak references memo still holds (other tests' objects may come and go)."""
    return [ref for key, ref in refs if key in memo._kept and memo._kept[key][0] is ref]


def test_a_value_is_made_once_per_object_and_key_and_goes_with_its_object():
    made = []

    def make(name):
        return lambda: made.append(name) or f"value of {name}"

    first, second = Thing(), Thing()
    assert memo.remember(first, "a", make("first a")) == "value of first a"
    assert memo.remember(first, "a", make("again")) == "value of first a"  # kept: not made again
    assert memo.remember(first, "b", make("first b")) == "value of first b"
    assert memo.remember(second, "a", make("second a")) == "value of second a"  # another object, its own
    assert made == ["first a", "first b", "second a"]
    refs = [(id(obj), memo._kept[id(obj)][0]) for obj in (first, second)]
    del first
    gc.collect()
    assert _held(refs) == [refs[1][1]]  # first's entry freed with its object, second's kept
    assert memo.remember(second, "a", make("never")) == "value of second a"


def test_an_object_keeps_at_most_per_object_max_values():
    thing = Thing()
    for k in range(memo.PER_OBJECT_MAX + 5):
        memo.remember(thing, k, lambda k=k: k)
    assert len(memo._values_of(thing)) <= memo.PER_OBJECT_MAX


def test_a_traces_views_and_their_json_go_when_the_trace_goes():
    """What show_stage keeps (a trace's stage views, each figure's JSON) holds no reference back to the
    trace: when the shared cache lets a trace go, its figures go too (bench/load.py watches the memory)."""
    import plotly.io

    from attention_core import AttentionConfig, trace_sentence
    from figures.stages import stage_view, stages_for

    trace = trace_sentence("the cat saw the dog", AttentionConfig(heads=2, dtype="float64"))
    objects = [trace]
    shown = stages_for(trace)
    for stage in shown:
        view = memo.remember(trace, ("view", stage.key), lambda stage=stage, t=trace: stage_view(t, stage.key, 0))
        for figure in view.figures:
            memo.remember(figure, "json", lambda figure=figure: plotly.io.to_json(figure, validate=False))
            objects.append(figure)
    refs = [(id(obj), memo._kept[id(obj)][0]) for obj in objects]
    assert len(_held(refs)) > len(shown)
    del trace, view, figure, objects
    gc.collect()
    assert _held(refs) == []


def test_heavy_work_is_served_in_the_order_it_asked():
    """ui.traces.InTurn, the server's slots for heavy work (large traces, training runs): a slot freed goes to the
    first in line, not to a newcomer (a threading.Semaphore hands it to whoever asks first after the release: a run
    waiting behind a stream of large traces could wait for ever), and the line is served in its order."""
    import threading
    import time

    from ui.traces import InTurn

    slots, served, threads = InTurn(1), [], []
    assert slots.acquire()

    def wait_then_hold(name: str) -> None:
        with slots:
            served.append(name)

    def in_line(name: str, ahead: int) -> None:
        threads.append(threading.Thread(target=wait_then_hold, args=(name,)))
        threads[-1].start()
        while slots.waiting <= ahead:
            time.sleep(0.001)

    in_line("first", 0)
    slots.release()  # freed while "first" waits alone in line: it is "first"'s
    assert not slots.acquire(blocking=False), "a newcomer took the slot freed for the first in line"
    threads[0].join(timeout=10)
    assert served == ["first"]
    assert slots.acquire()
    in_line("second", 0)
    in_line("third", 1)
    slots.release()
    for thread in threads:
        thread.join(timeout=10)
    assert served == ["first", "second", "third"]
    assert slots.acquire(blocking=False) and slots.waiting == 0  # all given back: free again
